"""Whether on-call has already quieted an alert or incident: snoozed past now, or acknowledged
at the severity it is being notified at (a rise still pages). A leaf, so incidents, escalation
and the hand actions of `alerts.lifecycle` all read the one rule without importing each other."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from storage.types import to_utc


def silenced(alert: Any, severity: str, now: datetime) -> bool:
    """True when `alert` (or incident) is snoozed past `now`, or was acknowledged at `severity`."""
    if alert is None:
        return False
    if alert.snoozed_until is not None and to_utc(now) < to_utc(alert.snoozed_until):
        return True
    return alert.acknowledged_at is not None and alert.silenced_severity == severity
