"""On-call actions on an incident: acknowledge, snooze and resolve apply to the incident and to
each of its open members (each member's action is recorded in `alert_actions`, with the
incident's note). Resolving the incident resolves its members and sends the one resolve
notification. Functions take the caller's session and never commit.
"""

from __future__ import annotations

from datetime import datetime

from alerts import lifecycle
from alerts.incidents import open_members
from alerts.lifecycle import MAX_ACTOR_CHARS, LifecycleError
from alerts.rules_file import RuleSet, load_rules
from alerts.service import resolve_member
from storage.models import Incident
from storage.types import to_utc
from vigil.config import Settings


def _open_incident(session, incident_id: int) -> Incident:
    incident = session.get(Incident, incident_id)
    if incident is None:
        raise LookupError(f"incident {incident_id} does not exist")
    if incident.status != "open":
        raise LifecycleError(
            f"incident {incident_id} is {incident.status}; only an open incident can be changed"
        )
    return incident


def acknowledge(
    session, incident_id: int, *, actor: str, now: datetime, note: str | None = None
) -> Incident:
    incident = _open_incident(session, incident_id)
    incident.acknowledged_at, incident.acknowledged_by = to_utc(now), actor[:MAX_ACTOR_CHARS]
    incident.silenced_severity = incident.severity
    for alert in open_members(session, incident):
        lifecycle.acknowledge(session, alert.id, actor=actor, now=now, note=note)
    return incident


def snooze(
    session,
    incident_id: int,
    *,
    actor: str,
    until: datetime,
    now: datetime,
    note: str | None = None,
) -> Incident:
    incident = _open_incident(session, incident_id)
    alive = open_members(session, incident)
    for alert in alive:  # checks the snooze's bounds before anything changes
        lifecycle.snooze(session, alert.id, actor=actor, until=until, now=now, note=note)
    if not alive:
        lifecycle.check_snooze(until, now)
    incident.snoozed_until, incident.silenced_severity = to_utc(until), incident.severity
    return incident


def resolve(
    session,
    incident_id: int,
    *,
    actor: str,
    now: datetime,
    settings: Settings,
    note: str | None = None,
    rules: RuleSet | None = None,
) -> Incident:
    """Resolve by hand: every open member, then the incident, with one resolve notification."""
    incident = _open_incident(session, incident_id)
    rules = rules if rules is not None else load_rules(settings)
    for alert in open_members(session, incident):
        lifecycle.record(session, alert, "resolve", actor=actor, now=now, note=note)
        resolve_member(session, alert, now=to_utc(now), settings=settings, rules=rules)
    session.flush()
    return incident
