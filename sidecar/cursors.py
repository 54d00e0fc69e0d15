"""Progress marks of the incremental jobs, in `job_cursors` (one text value per name)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from storage.models import JobCursor


def get_cursor(session: Session, name: str) -> str | None:
    return session.scalar(select(JobCursor.value).where(JobCursor.name == name))


def set_cursor(session: Session, name: str, value: str, now: datetime) -> None:
    """Upsert; the caller commits (so the mark moves in the same transaction as the work)."""
    row = session.get(JobCursor, name)
    if row is None:
        session.add(JobCursor(name=name, value=value, updated_at=now))
    else:
        row.value = value
        row.updated_at = now
    session.flush()
