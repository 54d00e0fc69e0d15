"""Escalation of incidents nobody has acknowledged (the rules file's `escalation`, per route:
alerts/escalation_rules.py). For each open incident that was notified and is not acknowledged,
snoozed, silenced, expected or inhibited: after `after_s` its trigger goes once to the `to`
targets too, and every `repeat_interval_s` since its last notification it is sent again to every
target that heard it. Each is one outbox row per target, like any notification. Functions take
the caller's session and never commit."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from alerts import silences
from alerts.incident_members import ranked
from alerts.incidents import enqueue, refresh
from alerts.quieted import silenced
from alerts.rules_file import RuleSet, load_rules
from storage.models import Delivery, Incident
from storage.types import to_utc
from vigil.config import Settings


def _quiet(session: Session, incident: Incident, alive: list, now: datetime) -> bool:
    if incident.acknowledged_at is not None or incident.expected_at is not None:
        return True
    if silenced(incident, incident.severity, now) or incident.inhibited_by is not None:
        return True
    return silences.silencing(silences.active(session, now), alive) is not None


def escalate_due(
    session: Session, *, now: datetime, settings: Settings, rules: RuleSet | None = None
) -> list[Delivery]:
    rules = rules if rules is not None else load_rules(settings)
    if not rules.escalations:
        return []
    out: list[Delivery] = []
    incidents = session.scalars(
        select(Incident).where(Incident.status == "open", Incident.notifications > 0)
    )
    for incident in list(incidents):
        policy = rules.escalations.get(incident.severity)
        alive = refresh(session, incident)
        if policy is None or not alive or _quiet(session, incident, alive, now):
            continue
        alive = ranked(incident, alive, inhibited=False)
        told = set(incident.notified_targets or [])
        escalate_to = [t for t in rules.named(policy.to) if t.name not in told]
        age = now - to_utc(incident.first_seen)
        if escalate_to and policy.after_s is not None and age >= timedelta(seconds=policy.after_s):
            out += enqueue(session, incident, alive, escalate_to, event="trigger", now=now,
                           settings=settings, rules=rules)  # fmt: skip
            incident.notified_targets = sorted(told | {t.name for t in escalate_to})
            incident.last_notified = now
            continue
        last = incident.last_notified
        repeat = policy.repeat_interval_s
        if repeat and last is not None and now - to_utc(last) >= timedelta(seconds=repeat):
            again = [rules.targets[n] for n in sorted(told) if n in rules.targets]
            out += enqueue(session, incident, alive, again, event="trigger", now=now,
                           settings=settings, rules=rules)  # fmt: skip
            incident.last_notified = now
    return out
