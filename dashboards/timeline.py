"""The timeline an alert or incident page shows: when it opened, what people did, which
notifications went out. Each entry is {at, what, who, note}; the pages sort them by `at`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from storage.models import Delivery
from storage.types import to_utc


def opened(row: Any) -> dict[str, Any]:
    """The entry for an alert's or incident's opening, at the severity it opened at (an
    incident records it; an alert's severity is fixed by its rule)."""
    severity = getattr(row, "opened_severity", None) or row.severity
    return {
        "at": to_utc(row.first_seen),
        "what": f"opened ({severity})",
        "who": "vigil",
        "note": "",
    }


def notifications(deliveries: Iterable[Delivery]) -> list[dict[str, Any]]:
    """One entry per webhook delivery: when it was delivered (or created, while it is not)."""
    return [
        {
            "at": to_utc(d.delivered_at or d.created_at),
            "what": f"notification {d.status} ({d.format})",
            "who": "webhook",
            "note": "",
        }
        for d in deliveries
    ]
