"""Embeddings: float32 bytes + dim + model name per (sample, field, model)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import exists, func, or_, select
from sqlalchemy.orm import Session

from storage.models import Embedding, Sample
from storage.records import bytes_to_vector, vector_to_bytes
from storage.repositories._sql import chunked, insert_ignore
from storage.repositories.client_embeddings import is_client_model
from storage.repositories.samples import samples_lacking, window_filter

FIELDS = ("prompt", "response")


@dataclass
class EmbeddingRow:
    """One vector to store: the embedding of `field` (prompt|response) of a sample by `model`."""

    sample_id: str
    field: str
    model: str
    vector: np.ndarray | Sequence[float]


def store_embeddings(session: Session, rows: Iterable[EmbeddingRow]) -> int:
    """Store vectors as little-endian float32 bytes with their dim and model name; idempotent on
    (sample_id, field, model): an existing vector is kept. Returns how many rows were new.
    Raises ValueError on a bad field, a non-1-D/non-finite vector or a `client:` model name
    (those hold only vectors that came inside records). Does not commit."""
    values = []
    for row in rows:
        if row.field not in FIELDS:
            raise ValueError(f"field must be one of {FIELDS}, got {row.field!r}")
        if is_client_model(row.model):
            raise ValueError(f"model {row.model!r}: client: names are reserved for record vectors")
        data, dim = vector_to_bytes(row.vector)
        values.append(
            {"sample_id": row.sample_id, "field": row.field, "model": row.model,
             "dim": dim, "vector": data}
        )  # fmt: skip
    table = Embedding.__table__
    return len(insert_ignore(session, table, values, ["sample_id", "field", "model"], table.c.id))


def samples_missing_embeddings(
    session: Session, model: str, limit: int = 256, *, since: datetime | None = None
) -> list[dict[str, Any]]:
    """Samples that have text but no embedding at all by `model`, oldest first (timestamp >=
    `since` if given), as dicts {id, timestamp (RFC 3339), prompt, response}. The embed job
    stores both fields at once, so "any row for this model" means "done"."""
    has_any = exists().where(Embedding.sample_id == Sample.id, Embedding.model == model)
    has_text = or_(Sample.prompt.is_not(None), Sample.response.is_not(None))
    return samples_lacking(session, ~has_any, has_text, limit=limit, since=since)


def _stack(pairs: list[tuple[str, np.ndarray]]) -> tuple[list[str], np.ndarray]:
    if not pairs:
        return [], np.zeros((0, 0), dtype=np.float32)
    dims = {vec.shape[0] for _, vec in pairs}
    if len(dims) > 1:
        raise ValueError(f"embeddings of one model/field have mixed dimensions {sorted(dims)}")
    return [i for i, _ in pairs], np.stack([vec for _, vec in pairs])


def load_embeddings(
    session: Session, sample_ids: Sequence[str], model: str, field: str = "prompt"
) -> tuple[list[str], np.ndarray]:
    """(ids found, float32 matrix n x dim) for the given samples, in the order of `sample_ids`;
    samples without a vector are left out (compare the returned ids)."""
    found: dict[str, np.ndarray] = {}
    for chunk in chunked(list(sample_ids)):
        query = select(Embedding.sample_id, Embedding.vector, Embedding.dim).where(
            Embedding.model == model, Embedding.field == field, Embedding.sample_id.in_(chunk)
        )
        for sample_id, data, dim in session.execute(query):
            found[sample_id] = bytes_to_vector(data, dim)
    return _stack([(i, found[i]) for i in sample_ids if i in found])


def fetch_window_embeddings(
    session: Session,
    start: datetime,
    end: datetime,
    model: str,
    field: str = "prompt",
    *,
    segment: str | None = None,
    tenant: str | None = None,
) -> tuple[list[str], np.ndarray]:
    """(sample ids, float32 matrix) of the window's `field` vectors by `model`, ordered by
    (timestamp, id) like `fetch_window`; samples without a vector are left out."""
    query = (
        select(Embedding.sample_id, Embedding.vector, Embedding.dim)
        .join(Sample, Sample.id == Embedding.sample_id)
        .where(Embedding.model == model, Embedding.field == field)
        .where(*window_filter(start, end, segment=segment, tenant=tenant))
        .order_by(Sample.timestamp, Sample.id)
    )
    return _stack([(i, bytes_to_vector(d, n)) for i, d, n in session.execute(query)])


def count_embeddings(session: Session, model: str | None = None) -> int:
    """How many embedding rows (of `model`, or all)."""
    query = select(func.count()).select_from(Embedding)
    if model is not None:
        query = query.where(Embedding.model == model)
    return int(session.scalar(query) or 0)
