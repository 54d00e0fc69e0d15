"""Which open incidents involve a slice of traffic: one whose cause names it (a new tenant or
segment, the leading signal's slice, a member's slice in its order) or one with a member alert
that involves it (dashboards/segment_alerts.py). A drift incident is filed for the whole run, so
a new tenant's incident names the tenant in its cause, not in a segment."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from dashboards.segment_alerts import Involved
from storage.models import Incident

MAX_SCANNED = 200


@dataclass(frozen=True)
class InvolvedIncident:
    incident: Incident
    why: str


def cause_involvement(
    cause: dict[str, Any] | None, slices: Sequence[tuple[str, str]]
) -> str | None:
    """How an incident's cause names one of `slices` ((key, name) pairs), in words; None if not."""
    if not isinstance(cause, dict):
        return None
    labels = {f"{k}={v}" for k, v in slices}
    for value in cause.get("new_values") or []:
        if isinstance(value, dict) and (str(value.get("feature")), str(value.get("value"))) in set(
            slices
        ):
            return f"its cause names {value.get('feature')} {value.get('value')} as new"
    worst = cause.get("worst")
    if isinstance(worst, dict) and worst.get("segment") in labels:
        return f"its leading signal is in {worst.get('segment')}"
    for key in cause.get("order") or []:
        _, _, segment = str(key).partition("|")
        if segment in labels:
            return f"a member fired in {segment}"
    return None


def involved_incidents(
    session: Session, slices: Sequence[tuple[str, str]], alerts: Sequence[Involved]
) -> list[InvolvedIncident]:
    """The open incidents that involve the slice, newest first."""
    if not slices:
        return []
    by_member: dict[int, Any] = {}
    for item in alerts:
        incident_id = getattr(item.alert, "incident_id", None)
        if incident_id is not None and incident_id not in by_member:
            by_member[incident_id] = item
    rows = session.scalars(
        select(Incident)
        .where(Incident.status == "open")
        .order_by(Incident.last_seen.desc())
        .limit(MAX_SCANNED)
    )
    out = []
    for incident in rows:
        why = cause_involvement(incident.cause, slices)
        if why is None and incident.id in by_member:
            member = by_member[incident.id]
            why = f"member alert {member.alert.id}: {member.why}"
        if why is not None:
            out.append(InvolvedIncident(incident, why))
    return out
