"""Samples: bulk idempotent insert, time-window reads, counts and retention."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import JSON, ColumnElement, delete, func, literal, select
from sqlalchemy.orm import Session

from storage.hour import is_hour_start, sample_hour
from storage.models import Embedding, EvalScore, Sample
from storage.records import (
    ROW_FIELDS,
    bytes_to_vector,
    format_timestamp,
    record_from_row,
)
from storage.repositories._sql import affected_rows, chunked
from storage.repositories.sample_insert import insert_samples, scoped_id  # noqa: F401 - re-exported
from storage.repositories.window_cap import (
    DEFAULT_MIN_PER_STRATUM,
    capped_rows,
    nested_selection,
    selected_ids,
    weight_scale,
    window_selection,
)
from storage.types import to_utc

SEGMENT_KEYS = ("segment", "tenant", "prompt_version", "model_version")


def window_filter(
    start: datetime | None = None,
    end: datetime | None = None,
    *,
    segment: str | None = None,
    tenant: str | None = None,
    prompt_version: str | None = None,
    model_version: str | None = None,
) -> list[ColumnElement[bool]]:
    """WHERE terms on `samples` for start <= timestamp < end and equality on the given keys
    (None = no filter on that key). Naive datetimes are taken as UTC. Exactly one hour bucket
    (a drift window) is written on `hour` (the same rows), so the window index serves it."""
    terms: list[ColumnElement[bool]] = []
    if start is not None and end is not None and _one_hour(start, end):
        # the same rows by their hour bucket: an equality the window index leads with, so the
        # counts come from the index and each segment's draws come in order
        terms.append(Sample.hour == sample_hour(start))
    else:
        if start is not None:
            terms.append(Sample.timestamp >= to_utc(start))
        if end is not None:
            terms.append(Sample.timestamp < to_utc(end))
    for column, value in (
        (Sample.segment, segment),
        (Sample.tenant, tenant),
        (Sample.prompt_version, prompt_version),
        (Sample.model_version, model_version),
    ):
        if value is not None:
            terms.append(column == value)
    return terms


def _one_hour(start: datetime, end: datetime) -> bool:
    return is_hour_start(start) and to_utc(end) - to_utc(start) == timedelta(hours=1)


def samples_lacking(
    session: Session, *conditions: ColumnElement[bool], limit: int, since: datetime | None = None
) -> list[dict[str, Any]]:
    """Samples matching `conditions` (e.g. "no embedding row yet"), oldest first, as
    {id, timestamp, prompt, response}: the work queue of the sidecar's incremental jobs."""
    query = (
        select(Sample.id, Sample.timestamp, Sample.prompt, Sample.response)
        .where(*conditions)
        .order_by(Sample.timestamp, Sample.id)
        .limit(limit)
    )
    if since is not None:
        query = query.where(Sample.timestamp >= to_utc(since))
    return [
        {"id": i, "timestamp": format_timestamp(ts), "prompt": p, "response": r}
        for i, ts, p, r in session.execute(query)
    ]


def _scores_by_sample(session: Session, terms: list, ids: Sequence[str] | None = None):
    scores: dict[str, dict[str, float]] = defaultdict(dict)
    query = select(EvalScore.sample_id, EvalScore.name, EvalScore.score)
    if ids is None:
        query = query.join(Sample, Sample.id == EvalScore.sample_id).where(*terms)
        batches = [query]
    else:
        batches = [query.where(EvalScore.sample_id.in_(chunk)) for chunk in chunked(ids)]
    for batch in batches:
        for sample_id, name, score in session.execute(batch):
            scores[sample_id][name] = score
    return scores


def _embeddings_by_sample(session: Session, terms: list, model: str):
    out: dict[str, dict[str, np.ndarray]] = defaultdict(dict)
    query = (
        select(Embedding.sample_id, Embedding.field, Embedding.vector, Embedding.dim)
        .join(Sample, Sample.id == Embedding.sample_id)
        .where(Embedding.model == model, *terms)
    )
    for sample_id, field, data, dim in session.execute(query):
        out[sample_id][field] = bytes_to_vector(data, dim)
    return out


def window_columns(with_extra: bool = True) -> list[Any]:
    """The `samples` columns a record is built from (`record_from_row`); never `source` or
    `ingested_at`, and `extra` only when asked for (NULL in its place otherwise)."""
    extra = Sample.extra if with_extra else literal(None, JSON).label("extra")
    return [
        Sample.id,
        Sample.timestamp,
        *(getattr(Sample, f) for f in ROW_FIELDS),
        Sample.sample_weight,
        extra,
    ]


@dataclass(frozen=True)
class WindowRead:
    """A window as read: its records, and the ids of the rows whose vectors were read (None:
    every row's; else the nested subset the embedding tests read, `max_embedded_rows`)."""

    records: list[dict[str, Any]]
    vector_ids: frozenset[str] | None = None


def fetch_window(
    session: Session, start: datetime, end: datetime, *args: Any, **kwargs: Any
) -> list[dict[str, Any]]:
    """`read_window`'s records (its arguments)."""
    return read_window(session, start, end, *args, **kwargs).records


def read_window(
    session: Session,
    start: datetime,
    end: datetime,
    segment: str | None = None,
    tenant: str | None = None,
    *,
    prompt_version: str | None = None,
    model_version: str | None = None,
    limit: int | None = None,
    with_eval_scores: bool = True,
    embedding_model: str | None = None,
    max_rows: int | None = None,
    max_embedded_rows: int | None = None,
    min_per_segment: int = DEFAULT_MIN_PER_STRATUM,
    with_extra: bool = True,
) -> WindowRead:
    """Records with start <= timestamp < end (UTC), oldest first, optionally filtered by segment
    keys, as record dicts (see `record_from_row`): with their eval scores, and with embeddings
    as float32 arrays when `embedding_model` is given.

    `max_rows`: a window with more rows is read as a stratified sample by segment, weights
    rescaled so each segment's weighted total is the full window's
    (storage.repositories.window_cap). `max_embedded_rows` (with `max_rows`): only the rows of
    the nested stratified subset of that size carry their vectors, whatever else is embedded,
    so the read does not depend on how far the embed job went past the subset."""
    terms = window_filter(
        start, end, segment=segment, tenant=tenant,
        prompt_version=prompt_version, model_version=model_version,
    )  # fmt: skip
    columns = window_columns(with_extra)
    scale: dict[str | None, float] = {}
    vector_ids: frozenset[str] | None = None
    if max_rows is not None:
        selection = window_selection(session, terms, max_rows, min_per_segment)
        samples = capped_rows(session, terms, columns, selection)
        kept: dict[str | None, float] = defaultdict(float)
        for row in samples:
            kept[row.segment] += row.sample_weight
        scale = {
            seg: weight_scale(st, kept[seg])
            for seg, st in selection.strata.items()
            if st.quota < st.rows
        }
        if max_embedded_rows is not None and max_embedded_rows < selection.rows:
            nested = nested_selection(session, terms, selection, max_embedded_rows, min_per_segment)
            vector_ids = selected_ids(session, terms, nested)
    else:
        query = select(*columns).where(*terms).order_by(Sample.timestamp, Sample.id)
        samples = list(session.execute(query if limit is None else query.limit(limit)).all())
    if not samples:
        return WindowRead([], vector_ids)
    capped = limit is not None or max_rows is not None
    ids = [s.id for s in samples] if capped else None
    scores = _scores_by_sample(session, terms, ids) if with_eval_scores else {}
    embs: dict[str, dict[str, np.ndarray]] = {}
    if embedding_model and ids is not None:  # capped
        wanted = ids if vector_ids is None else sorted(vector_ids)
        for chunk in chunked(wanted):
            embs.update(_embeddings_by_sample(session, [Sample.id.in_(chunk)], embedding_model))
    elif embedding_model:
        embs = _embeddings_by_sample(session, terms, embedding_model)
    records = [record_from_row(s, scores.get(s.id), embs.get(s.id)) for s in samples]
    if scale:
        for record, row in zip(records, samples, strict=True):
            record["sample_weight"] = row.sample_weight * scale.get(row.segment, 1.0)
    return WindowRead(records, vector_ids)


def get_samples(session: Session, sample_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The records for `sample_ids` (with eval scores), in the order given; unknown ids skipped."""
    found: dict[str, Sample] = {}
    for chunk in chunked(list(sample_ids)):
        for sample in session.scalars(select(Sample).where(Sample.id.in_(chunk))):
            found[sample.id] = sample
    scores = _scores_by_sample(session, [], list(found))
    return [record_from_row(found[i], scores.get(i)) for i in sample_ids if i in found]


def count_samples(
    session: Session,
    start: datetime | None = None,
    end: datetime | None = None,
    *,
    segment: str | None = None,
    tenant: str | None = None,
) -> int:
    """How many samples in [start, end) (open-ended when None) matching the segment keys."""
    terms = window_filter(start, end, segment=segment, tenant=tenant)
    return int(session.scalar(select(func.count()).select_from(Sample).where(*terms)) or 0)


def count_by_segment(
    session: Session, start: datetime, end: datetime, key: str = "segment"
) -> dict[str | None, int]:
    """{value of `key` (segment|tenant|prompt_version|model_version) -> sample count}
    in the window."""
    if key not in SEGMENT_KEYS:
        raise ValueError(f"key must be one of {SEGMENT_KEYS}, got {key!r}")
    column = getattr(Sample, key)
    query = select(column, func.count()).where(*window_filter(start, end)).group_by(column)
    return {value: int(n) for value, n in session.execute(query)}


def delete_samples_older_than(session: Session, cutoff: datetime) -> int:
    """Retention: delete samples with timestamp < cutoff; their embeddings and eval scores go
    with them (FK ON DELETE CASCADE). Baselines keep their frozen copies (`baseline_samples`
    holds no FK to samples). Returns the number of samples deleted. Does not commit."""
    return affected_rows(
        session, delete(Sample.__table__).where(Sample.__table__.c.timestamp < to_utc(cutoff))
    )
