""" "This was expected" (a planned rollout, a new customer): one action on an incident. It stays
open as "expected, re-baselining" and is not notified again; its members keep firing into it
and stop counting toward new incidents, while a different change still opens (and pages) an
incident of its own (`alerts.incident_members.expected_members`). Once enough traffic came after
the change, the sidecar builds a baseline from it, validates and activates it
(`sidecar/jobs/rebaseline.py`); `rebaselined` records that on every member and resolves the
incident. Functions take the caller's session and never commit."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from alerts import lifecycle
from alerts.incident_members import open_members
from alerts.lifecycle import MAX_ACTOR_CHARS, LifecycleError
from alerts.rules_file import RuleSet, load_rules
from alerts.service import resolve_member
from storage.models import Incident
from storage.types import to_utc
from vigil.config import Settings


def mark_expected(
    session: Session, incident_id: int, *, actor: str, now: datetime, note: str | None = None
) -> Incident:
    incident = session.get(Incident, incident_id)
    if incident is None:
        raise LookupError(f"incident {incident_id} does not exist")
    if incident.status != "open":
        raise LifecycleError(f"incident {incident_id} is {incident.status}; it cannot be expected")
    if incident.expected_at is not None:
        raise LifecycleError(
            f"incident {incident_id} was marked expected by {incident.expected_by} already"
        )
    incident.expected_at, incident.expected_by = to_utc(now), actor[:MAX_ACTOR_CHARS]
    incident.expected_note = note
    for alert in open_members(session, incident):
        lifecycle.record(session, alert, "expected", actor=actor, now=now, note=note)
    return incident


def awaiting_rebaseline(session: Session) -> list[Incident]:
    """Open incidents marked expected whose new baseline is not active yet."""
    return list(
        session.scalars(
            select(Incident)
            .where(Incident.status == "open", Incident.expected_at.is_not(None))
            .order_by(Incident.id)
        )
    )


def rebaselined(
    session: Session,
    incident: Incident,
    *,
    baseline_id: int,
    now: datetime,
    settings: Settings,
    rules: RuleSet | None = None,
) -> Incident:
    """The new baseline is active: record it on every open member and resolve the incident."""
    rules = rules if rules is not None else load_rules(settings)
    incident.rebaseline_id = baseline_id
    note = f"expected change: baseline {baseline_id} built from the traffic after it, activated"
    for alert in open_members(session, incident):
        lifecycle.record(session, alert, "rebaselined", actor="vigil", now=now, note=note)
        resolve_member(session, alert, now=to_utc(now), settings=settings, rules=rules)
    session.flush()
    return incident
