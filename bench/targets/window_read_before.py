"""The capped window read as it was before the hour bucket, for side-by-side timing: the
window's terms on the timestamp range, the kept rows as one OR over the segments' parts, and
the nested vector rows the same way (every query visits the whole hour)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from storage.models import Sample
from storage.records import record_from_row
from storage.repositories._sql import chunked
from storage.repositories.samples import _embeddings_by_sample, _scores_by_sample, window_columns
from storage.repositories.window_cap import nested_selection, weight_scale, window_selection


def read_window_before(
    session: Session,
    start: datetime,
    end: datetime,
    *,
    embedding_model: str,
    max_rows: int,
    max_embedded_rows: int,
    min_per_segment: int,
) -> list[dict[str, Any]]:
    terms = [Sample.timestamp >= start, Sample.timestamp < end]
    selection = window_selection(session, terms, max_rows, min_per_segment)
    query = (
        select(*window_columns(False))
        .where(*terms, selection.term)
        .order_by(Sample.timestamp, Sample.id)
    )
    samples = list(session.execute(query).all())
    kept: dict[str | None, float] = defaultdict(float)
    for row in samples:
        kept[row.segment] += row.sample_weight
    scale = {
        s: weight_scale(st, kept[s]) for s, st in selection.strata.items() if st.quota < st.rows
    }
    vector_ids = None
    if max_embedded_rows < selection.rows:
        nested = nested_selection(session, terms, selection, max_embedded_rows, min_per_segment)
        vector_ids = set(session.scalars(select(Sample.id).where(*terms, nested.term)))
    ids = [s.id for s in samples]
    scores = _scores_by_sample(session, terms, ids)
    embs: dict = {}
    for chunk in chunked(ids if vector_ids is None else sorted(vector_ids)):
        embs.update(_embeddings_by_sample(session, [Sample.id.in_(chunk)], embedding_model))
    records = [record_from_row(s, scores.get(s.id), embs.get(s.id)) for s in samples]
    for record, row in zip(records, samples, strict=True):
        record["sample_weight"] = row.sample_weight * scale.get(row.segment, 1.0)
    return records
