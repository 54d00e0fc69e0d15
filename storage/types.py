"""UTC-aware datetimes on every backend.

PostgreSQL's `timestamptz` keeps the instant but hands it back in the session's time zone;
SQLite keeps no zone at all and hands back naive values. `UTCDateTime` stores UTC on both and
always returns an aware UTC datetime, so callers never compare naive with aware values.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import DateTime
from sqlalchemy.types import TypeDecorator


def utcnow() -> datetime:
    return datetime.now(UTC)


def to_utc(value: datetime) -> datetime:
    """Aware -> converted to UTC; naive -> taken as UTC (the convention throughout Vigil)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


class UTCDateTime(TypeDecorator):
    """`DateTime(timezone=True)` that binds UTC and always returns aware UTC datetimes."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"expected a datetime, got {type(value).__name__}")
        value = to_utc(value)
        # SQLite stores text without a zone: store naive UTC so text order is time order
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value, dialect):
        return None if value is None else to_utc(value)
