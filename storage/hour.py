"""Each sample's hour bucket: whole hours since the Unix epoch (UTC) of its timestamp.

Drift windows are hours. `samples.hour` with the index (hour, segment, draw, sample_weight)
lets a one-hour (or whole-hours) window count its segments from the index alone and read a
capped segment's kept rows (the smallest draws, storage.draw) as one index range, so the read
follows the rows kept, not the rows the hour holds.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from storage.types import to_utc

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_HOUR = timedelta(hours=1)


def sample_hour(timestamp: datetime) -> int:
    """The hour bucket of `timestamp` (naive: UTC): floor((t - epoch) / 1 h)."""
    return (to_utc(timestamp) - _EPOCH) // _HOUR


def is_hour_start(timestamp: datetime) -> bool:
    """Whether `timestamp` is exactly the start of an hour bucket."""
    return (to_utc(timestamp) - _EPOCH) % _HOUR == timedelta(0)
