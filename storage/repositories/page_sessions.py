"""Page sessions: open one at login, look one up per request, revoke one at logout, and drop
the expired."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from sqlalchemy import delete, update
from sqlalchemy.orm import Session

from storage.models.page_session import PageSession
from storage.repositories._sql import affected_rows


def _row_id(session_id: str) -> str:
    # the table holds a digest: a leaked database row cannot be replayed as a cookie
    return hashlib.sha256(session_id.encode()).hexdigest()


def open_session(
    session: Session, session_id: str, key_id: str, now: datetime, ttl_s: float
) -> None:
    """Record a new login; expired rows go at the same time (logins are rare, the table small)."""
    session.execute(delete(PageSession).where(PageSession.expires_at < now))
    session.add(
        PageSession(
            id=_row_id(session_id),
            key_id=key_id,
            created_at=now,
            expires_at=now + timedelta(seconds=ttl_s),
        )
    )


def live_key_id(session: Session, session_id: str, now: datetime) -> str | None:
    """The key behind a session that is neither revoked nor expired."""
    row = session.get(PageSession, _row_id(session_id))
    if row is None or row.revoked_at is not None or row.expires_at <= now:
        return None
    return row.key_id


def revoke_session(session: Session, session_id: str, now: datetime) -> bool:
    revoke = (
        update(PageSession)
        .where(PageSession.id == _row_id(session_id), PageSession.revoked_at.is_(None))
        .values(revoked_at=now)
    )
    return affected_rows(session, revoke) == 1
