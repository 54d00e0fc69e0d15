"""The drift windows the sidecar still has to read: aligned to Settings.drift_interval_s, after
the drift job's cursor (the end of the last finished window)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from sidecar.cursors import get_cursor
from storage.types import to_utc

log = logging.getLogger("vigil.sidecar.drift")

CURSOR = "drift"
MAX_CATCH_UP = 24  # windows; after a long outage older windows are skipped (logged)


def due_windows(
    cursor: datetime | None, now: datetime, interval_s: int
) -> list[tuple[datetime, datetime]]:
    """Complete windows after `cursor`; without one, the last complete aligned window."""
    step = timedelta(seconds=interval_s)
    epoch = to_utc(now).timestamp()
    aligned = datetime.fromtimestamp(epoch - epoch % interval_s, UTC)
    start = to_utc(cursor) if cursor is not None else aligned - step
    windows = []
    while start + step <= to_utc(now):
        windows.append((start, start + step))
        start += step
    if len(windows) > MAX_CATCH_UP:
        log.warning(
            "drift job skips %d old windows (more than %d missed)",
            len(windows) - MAX_CATCH_UP,
            MAX_CATCH_UP,
        )
        windows = windows[-MAX_CATCH_UP:]
    return windows


def drift_cursor(session: Session) -> datetime | None:
    raw = get_cursor(session, CURSOR)
    return to_utc(datetime.fromisoformat(raw)) if raw else None


def windows_to_read(
    session: Session, now: datetime, interval_s: int
) -> list[tuple[datetime, datetime]]:
    """The complete windows the drift job has not run yet, oldest first, then the one now
    filling (its rows are embedded while it fills, so the window is ready when it closes)."""
    due = due_windows(drift_cursor(session), now, interval_s)
    step = timedelta(seconds=interval_s)
    epoch = to_utc(now).timestamp()
    filling = datetime.fromtimestamp(epoch - epoch % interval_s, UTC)
    return [*due, (filling, filling + step)]
