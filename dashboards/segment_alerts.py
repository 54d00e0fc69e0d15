"""Which alerts involve a slice of traffic (a tenant, a segment): filed under its label, with a
result in it, or naming it as a new value of its key — a new tenant's alert is filed under `*`
(the new value shows in the whole window, not in a segment the baseline never had)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from storage.models import Alert

MAX_SCANNED = 500  # open alerts looked at, newest first
MAX_CHARTS = 3


@dataclass(frozen=True)
class Involved:
    alert: Alert
    why: str  # in words: how the alert involves the slice
    results: tuple[tuple[str, str, str], ...]  # (test, feature, segment) of its results that do


def _names(detail: Any, field: str) -> list[str]:
    items = (detail or {}).get(field) if isinstance(detail, dict) else None
    out = []
    for v in items or []:
        out.append(str(v.get("value")) if isinstance(v, dict) else str(v))
    return out


def involvement(
    alert_segment: str, evidence: dict[str, Any] | None, slices: Sequence[tuple[str, str]]
) -> tuple[str, tuple[tuple[str, str, str], ...]] | None:
    """(why, the results that involve it) when the alert involves one of `slices` ((key, name)
    pairs, e.g. ("tenant", "newco")), else None."""
    labels = {f"{k}={v}" for k, v in slices}
    results = [r for r in (evidence or {}).get("results") or [] if isinstance(r, dict)]
    hits: list[tuple[str, str, str]] = []
    why = ""
    for r in results:
        ident = (str(r.get("test")), str(r.get("feature") or "*"), str(r.get("segment") or "*"))
        if ident[2] in labels:
            hits.append(ident)
            why = why or f"a result in {ident[2]}"
            continue
        for key, name in slices:
            if ident[1] == key and name in _names(r.get("detail"), "new"):
                hits.append(ident)
                why = why or f"names {key} {name} as new"
            elif ident[1] == key and name in _names(r.get("detail"), "vanished"):
                hits.append(ident)
                why = why or f"names {key} {name} as gone"
    if alert_segment in labels:
        return f"filed under {alert_segment}", tuple(hits)
    return (why, tuple(hits)) if hits else None


def involved_alerts(session: Session, slices: Sequence[tuple[str, str]]) -> list[Involved]:
    """The open alerts that involve the slice, newest first."""
    if not slices:
        return []
    rows = session.scalars(
        select(Alert)
        .where(Alert.status == "open")
        .order_by(Alert.last_seen.desc())
        .limit(MAX_SCANNED)
    )
    out = []
    for alert in rows:
        found = involvement(alert.segment, alert.evidence, slices)
        if found is not None:
            out.append(Involved(alert, found[0], found[1]))
    return out


def chart_keys(
    involved: Iterable[Involved], own_labels: Sequence[str]
) -> list[tuple[str, str, str]]:
    """The involving results worth a chart on the slice's page: those not under its own labels
    (those are charted already), at most MAX_CHARTS, first seen first."""
    seen: list[tuple[str, str, str]] = []
    for item in involved:
        for key in item.results:
            if key[2] not in own_labels and key not in seen:
                seen.append(key)
    return seen[:MAX_CHARTS]
