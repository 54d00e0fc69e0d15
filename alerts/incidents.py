"""Incidents: one event, one notification per target (Alertmanager's group_by and inhibition,
PagerDuty's one incident per dedup key).

Alerts are joined into incidents by their group (`group_of`): every drift rule's alert goes to
the open `drift` incident (one drift run's firing results are one event, told in one sentence:
the run's cause), the engine's canaries to the open `engine` incident, and any other condition
rule is an incident of its own. Only incidents notify:

- a trigger when the incident opens, and again only when its severity rises;
- one resolve when its last open member resolves (to every target that heard the trigger);
- members never notify on their own; an acknowledged or snoozed incident (or one whose open
  members all are) is not re-notified at the severity it was silenced at;
- inhibition: while the `engine` incident is open, `model` and `eval` drift members are
  explained by it; they do not count towards the drift incident's severity, and a drift
  incident made only of them is not notified at all (`inhibited_by` names the engine incident).
  The engine serves one model, so "the same model" is every model/eval member of the window.

Functions take the caller's session and never commit.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from alerts import silences
from alerts.incident_members import (
    INHIBITED_KINDS,
    expected_members,
    led_by_trigger_lead,
    members,
    open_incident_for,
    open_members,
    ranked,
)
from alerts.incident_payloads import build_incident_payload
from alerts.proposal import SEVERITY_RANK
from alerts.quieted import silenced
from alerts.routing import match_values
from alerts.rules_file import RuleSet, Target
from alerts.silences import silencing
from storage.models import Alert, Delivery, Incident
from vigil.alert_table import DRIFT_RULE_NAMES
from vigil.config import Settings

DRIFT_GROUP = "drift"
ENGINE_GROUP = "engine"
LOWEST_SEVERITY = min(SEVERITY_RANK, key=SEVERITY_RANK.__getitem__)
__all__ = ["INHIBITED_KINDS", "attach", "close_if_done", "inhibitor", "members", "notify",
           "open_members", "ranked", "refresh", "enqueue"]  # fmt: skip


def group_of(alert: Alert) -> str:
    if alert.rule in DRIFT_RULE_NAMES:
        return DRIFT_GROUP
    if alert.kind == "engine":
        return ENGINE_GROUP
    return alert.dedupe_key


def attach(
    session: Session,
    alerts: Iterable[Alert],
    *,
    run_id: int | None,
    now: datetime,
    cause: Mapping[str, Any] | None = None,
) -> list[Incident]:
    """Put each fired alert into its group's open incident (opened here when there is none);
    return the incidents touched. `cause` (the drift run's headline and what it was built from)
    becomes the drift incident's headline."""
    by_group: dict[str, list[Alert]] = defaultdict(list)
    for alert in alerts:
        by_group[group_of(alert)].append(alert)
    touched = []
    for key in sorted(by_group):  # one lock order for concurrent callers
        _lock(session, "vigil-incident:" + key)
        kept, group = expected_members(session, by_group[key])
        for quiet in kept:  # members of an expected change stay in it, quietly
            quiet.last_seen = now
            touched.append(quiet)
        if not group:
            continue
        incident = open_incident_for(session, key, group)
        if incident is None:
            lead = max(group, key=lambda a: SEVERITY_RANK[a.severity])
            incident = Incident(
                group_key=key,
                status="open",
                severity=LOWEST_SEVERITY,  # raised by `refresh` from the members it counts
                kind=lead.kind,
                headline=lead.summary,
                first_seen=now,
                last_seen=now,
                notifications=0,
            )
            session.add(incident)
            session.flush()
        for alert in group:
            alert.incident_id = incident.id
        incident.last_seen = now
        if run_id is not None:
            incident.run_id = run_id
        if key == DRIFT_GROUP and cause:
            incident.cause = dict(cause)
        touched.append(incident)
    session.flush()
    for incident in touched:
        refresh(session, incident)
        if incident.opened_severity is None:
            incident.opened_severity = incident.severity
    return touched


def inhibitor(session: Session, incident: Incident) -> Incident | None:
    if incident.group_key != DRIFT_GROUP:
        return None
    return session.scalars(
        select(Incident)
        .where(Incident.group_key == ENGINE_GROUP, Incident.status == "open")
        .order_by(Incident.id)
    ).first()


def refresh(session: Session, incident: Incident) -> list[Alert]:
    """Severity, kind, headline and inhibition from the open members; returns them ranked.
    The severity is the highest the incident reached: a member resolving (by hand or because
    its rule stopped firing) never lowers it, so the page and the resolve tell what paged."""
    alive = open_members(session, incident)
    # what it reached stays, except a level only inhibited members set (never paged)
    reached = (incident.severity if incident.inhibited_by is None else LOWEST_SEVERITY,
               incident.notified_severity or LOWEST_SEVERITY)  # fmt: skip
    engine = inhibitor(session, incident)
    inhibited = engine is not None
    alive = ranked(incident, alive, inhibited)
    counted = [a for a in alive if not (inhibited and a.kind in INHIBITED_KINDS)]
    incident.inhibited_by = engine.id if engine is not None and alive and not counted else None
    scope = counted or alive
    if scope:
        incident.severity = max(
            (*reached, *(a.severity for a in scope)), key=SEVERITY_RANK.__getitem__
        )
        incident.kind = scope[0].kind
        headline = (
            (incident.cause or {}).get("headline") if incident.group_key == DRIFT_GROUP else None
        )
        incident.headline = headline or scope[0].summary
    return alive


def notify(
    session: Session, incident: Incident, *, now: datetime, settings: Settings, rules: RuleSet
) -> list[Delivery]:
    """The incident's trigger, when it is new to its targets or its severity rose."""
    alive = refresh(session, incident)
    if not alive or incident.inhibited_by is not None:
        return []
    severity = incident.severity
    if incident.notified_severity is not None and SEVERITY_RANK[severity] <= SEVERITY_RANK.get(
        incident.notified_severity, -1
    ):
        return []
    if silenced(incident, severity, now) or all(silenced(a, a.severity, now) for a in alive):
        return []
    if incident.expected_at is not None:  # "this was expected": re-baselining, not re-told
        return []
    inhibited_now = inhibitor(session, incident) is not None
    counted = [a for a in alive if not (inhibited_now and a.kind in INHIBITED_KINDS)]
    if silencing(silences.active(session, now), counted or alive) is not None:
        return []
    inhibited = incident.inhibited_by is not None or inhibitor(session, incident) is not None
    targets: dict[str, Target] = {}
    for alert in alive:
        if not (inhibited and alert.kind in INHIBITED_KINDS):
            targets.update((t.name, t) for t in _targets(rules, alert))
    rows = enqueue(
        session,
        incident,
        alive,
        list(targets.values()),
        event="trigger",
        now=now,
        settings=settings,
        rules=rules,
    )
    incident.notified_severity, incident.last_notified = severity, now
    incident.notified_targets = sorted(set(incident.notified_targets or []) | set(targets))
    for alert in alive:
        alert.last_notified = now
    return rows


def close_if_done(
    session: Session, incident_id: int | None, *, now: datetime, settings: Settings, rules: RuleSet
) -> Incident | None:
    """Resolve the incident once no member is open: one resolve to the targets told of it."""
    incident = session.get(Incident, incident_id) if incident_id is not None else None
    if incident is None or incident.status != "open":
        return incident
    session.flush()
    if refresh(session, incident):
        return incident
    incident.status, incident.resolved_at = "resolved", now
    told = [
        rules.targets[name] for name in incident.notified_targets or [] if name in rules.targets
    ]
    if incident.notifications:
        enqueue(
            session,
            incident,
            led_by_trigger_lead(session, incident),
            told,
            event="resolve",
            now=now,
            settings=settings,
            rules=rules,
        )
    session.flush()
    return incident


def _targets(rules: RuleSet, alert: Alert) -> tuple[Target, ...]:
    rule = rules.rule_for(
        match_values(
            rule=alert.rule, kind=alert.kind, segment=alert.segment, evidence=alert.evidence
        )
    )
    return rules.targets_for(alert.severity, rule if rule is not None and rule.enabled else None)


def enqueue(
    session: Session,
    incident: Incident,
    ranked_members: list[Alert],
    targets: list[Target],
    *,
    event: str,
    now: datetime,
    settings: Settings,
    rules: RuleSet,
) -> list[Delivery]:
    """One outbox row per target; the idempotency key names (incident, event, notification,
    target): the same on every retry, different for the next notification."""
    if not targets or not ranked_members:
        return []
    incident.notifications += 1
    lead = ranked_members[0]
    rows = []
    for target in targets:
        digest = hashlib.sha256(f"{target.name}\n{target.url}".encode()).hexdigest()[:12]
        payload = build_incident_payload(
            incident,
            ranked_members,
            target,
            event=event,
            public_url=settings.public_url,
            rules=rules,
        )
        rows.append(
            Delivery(
                alert_id=lead.id,
                incident_id=incident.id,
                target=target.url,
                format=target.format,
                payload=payload,
                status="pending",
                attempts=0,
                idempotency_key=f"vigil-i{incident.id}-{event}-{incident.notifications}-{digest}",
                next_attempt_at=now,
                created_at=now,
            )
        )
    session.add_all(rows)
    return rows


def _lock(session: Session, key: str) -> None:
    """Two sidecars opening the same incident at once: serialised on PostgreSQL by an advisory
    transaction lock (SQLite serialises writers)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": key})
