"""The incidents on-call looks at first: each one's headline, severity, since when, how many
alerts it holds (open of all) and who acknowledged, snoozed, silenced (alerts/silences.py) or
expected it. Used by the
overview (open ones, the most severe first) and by `/incidents` and `/api/v1/incidents` (filters
by state, severity and segment)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from alerts import silences
from dashboards.segment_incidents import cause_involvement
from storage.models import Alert, Incident
from storage.types import to_utc
from vigil.alert_table import SEVERITIES, SEVERITY_RANK

STATES = ("open", "acknowledged", "snoozed", "expected", "resolved", "all")
MAX_LISTED = 200


@dataclass(frozen=True)
class IncidentFilter:
    state: str = "open"  # "open" is every unresolved one: acknowledged, snoozed, expected too
    severity: str | None = None
    segment: str | None = None  # a label `key=name`, as the alerts and the cause name slices


def state_of(incident: Incident, now: datetime) -> str:
    if incident.status != "open":
        return "resolved"
    if incident.expected_at is not None:
        return "expected"
    if incident.snoozed_until is not None and to_utc(incident.snoozed_until) > now:
        return "snoozed"
    if incident.acknowledged_at is not None:
        return "acknowledged"
    return "open"


def ack_words(incident: Incident, state: str) -> str:
    """Who is on it, in words: what the list and the overview show under "on-call"."""
    if state == "expected":
        return f"expected by {incident.expected_by}, re-baselining"
    if state == "snoozed" and incident.snoozed_until is not None:
        return f"snoozed until {to_utc(incident.snoozed_until):%m-%d %H:%M} UTC"
    if state == "acknowledged":
        return f"acknowledged by {incident.acknowledged_by}"
    return "resolved" if state == "resolved" else "not acknowledged"


def _matches(incident: Incident, wanted: IncidentFilter, state: str, segments: set[str]) -> bool:
    if wanted.state == "open" and state == "resolved":
        return False
    if wanted.state not in ("open", "all") and state != wanted.state:
        return False
    if wanted.severity and incident.severity != wanted.severity:
        return False
    if wanted.segment:
        key, _, name = wanted.segment.partition("=")
        named = cause_involvement(incident.cause, [(key, name)]) is not None
        return named or wanted.segment in segments
    return True


def list_incidents(
    session: Session, now: datetime, wanted: IncidentFilter | None = None
) -> list[dict[str, Any]]:
    """The incidents that pass the filter: the most severe first, then the newest."""
    wanted = wanted or IncidentFilter()
    query = select(Incident).order_by(Incident.last_seen.desc()).limit(MAX_LISTED)
    if wanted.state in ("open", "acknowledged", "snoozed", "expected"):
        query = query.where(Incident.status == "open")
    elif wanted.state == "resolved":
        query = query.where(Incident.status != "open")
    incidents = list(session.scalars(query))
    ids = [i.id for i in incidents]
    # keyed as the column is typed (nullable); every key read here is an incident's id
    counts: Counter[tuple[int | None, str]] = Counter()
    segments: dict[int | None, set[str]] = {i: set() for i in ids}
    if ids:
        for incident_id, status, segment, n in session.execute(
            select(Alert.incident_id, Alert.status, Alert.segment, func.count())
            .where(Alert.incident_id.in_(ids))
            .group_by(Alert.incident_id, Alert.status, Alert.segment)
        ):
            counts[(incident_id, status)] += n
            segments[incident_id].add(segment)
    alive: dict[int | None, list[Alert]] = {i: [] for i in ids}
    if ids:
        for alert in session.scalars(
            select(Alert).where(Alert.incident_id.in_(ids), Alert.status == "open")
        ):
            alive[alert.incident_id].append(alert)
    held = silences.active(session, now)
    rows: list[dict[str, Any]] = []
    for incident in incidents:
        state = state_of(incident, now)
        if not _matches(incident, wanted, state, segments[incident.id]):
            continue
        silence = silences.silencing(held, alive[incident.id]) if state != "resolved" else None
        on_call = ack_words(incident, state)
        if silence is not None:
            on_call += f"; silenced by #{silence.id} until {to_utc(silence.ends_at):%m-%d %H:%M}"
        rows.append(
            {
                "id": incident.id,
                "headline": incident.headline,
                "severity": incident.severity,
                "kind": incident.kind,
                "state": state,
                "on_call": on_call,
                "silenced_by": silence.id if silence is not None else None,
                "since": to_utc(incident.first_seen),
                "age_s": (now - to_utc(incident.first_seen)).total_seconds(),
                "open_members": counts[(incident.id, "open")],
                "members": sum(n for (i, _), n in counts.items() if i == incident.id),
                "run_id": incident.run_id,
            }
        )
    rows.sort(key=lambda r: (-SEVERITY_RANK.get(r["severity"], 0), -r["since"].timestamp()))
    return rows


def as_json(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "since": row["since"].isoformat()}


SEVERITY_CHOICES = tuple(reversed(SEVERITIES))
