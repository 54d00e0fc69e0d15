"""How far behind the sidecar's incremental jobs are: the arrival time of the oldest sample
each one still has to handle (None: nothing waiting)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import and_, exists, func, or_, select
from sqlalchemy.orm import Session

from storage.models import Embedding, Sample
from storage.types import to_utc


def oldest_unembedded(session: Session, model: str) -> datetime | None:
    """When the oldest sample with text but no `model` embedding arrived (the embed job's
    queue, `samples_missing_embeddings`)."""
    has_any = exists().where(Embedding.sample_id == Sample.id, Embedding.model == model)
    has_text = or_(Sample.prompt.is_not(None), Sample.response.is_not(None))
    oldest = session.scalar(select(func.min(Sample.ingested_at)).where(~has_any, has_text))
    return None if oldest is None else to_utc(oldest)


def oldest_unvisited(session: Session, after: tuple[datetime, str] | None) -> datetime | None:
    """When the oldest sample past a (ingested_at, id) cursor arrived (the evaluate job's queue)."""
    query = select(func.min(Sample.ingested_at)).where(Sample.ingested_at.is_not(None))
    if after is not None:
        ts, sample_id = after
        query = query.where(or_(Sample.ingested_at > ts, and_(Sample.ingested_at == ts, Sample.id > sample_id)))
    oldest = session.scalar(query)
    return None if oldest is None else to_utc(oldest)
