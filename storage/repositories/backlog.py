"""How far behind the sidecar's incremental jobs are: the arrival time of the oldest sample
each one still has to handle (None: nothing waiting)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from storage.models import Sample
from storage.types import to_utc


def oldest_unvisited(session: Session, after: tuple[datetime, str] | None) -> datetime | None:
    """When the oldest sample past a (ingested_at, id) cursor arrived (the evaluate job's queue)."""
    query = select(func.min(Sample.ingested_at)).where(Sample.ingested_at.is_not(None))
    if after is not None:
        ts, sample_id = after
        query = query.where(
            or_(Sample.ingested_at > ts, and_(Sample.ingested_at == ts, Sample.id > sample_id))
        )
    oldest = session.scalar(query)
    return None if oldest is None else to_utc(oldest)
