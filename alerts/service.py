"""Raising alerts: proposals → deduped alert rows + outbox deliveries, in the caller's transaction.

`raise_alerts` never commits. The alert change and the deliveries it enqueues are written in
the same transaction as whatever else the caller does (the drift run's results): either all of
it commits, or none — a crash can neither lose a notification nor send one for an alert that
was rolled back (the transactional outbox). The delivery worker sends them after the commit.

Resolution follows the one rules table (`vigil.alert_table`): with `resolve_absent=True`
(default), an open alert of a drift rule whose rule + segment did not fire in this call is
resolved at once. Alerts are members of incidents (`alerts.incidents`), which alone notify: a
trigger when one opens or its severity rises, a resolve when its last member resolves.
Condition rules (the monitor's own health, engine canaries, the baseline reminder) are raised
and resolved through `raise_condition` by the code that watches them, or by hand
(`resolve_alert`). A rule muted in the rules file counts as not firing.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select, text
from sqlalchemy.orm import Session

from alerts import incidents
from alerts.dedupe import dedupe_key, plan_firing
from alerts.proposal import ALL_SEGMENTS, SEVERITY_RANK, Proposal, coerce_proposal
from alerts.routing import Decision
from alerts.rules_file import RuleSet, load_rules
from storage.models import Alert, Delivery
from storage.types import to_utc
from vigil.alert_table import DRIFT_RULE_NAMES, condition_rule
from vigil.config import Settings


def raise_alerts(
    session: Session,
    proposed: Iterable[Any],
    *,
    run_id: int | None,
    now: datetime,
    settings: Settings,
    rules: RuleSet | None = None,
    resolve_absent: bool = True,
    resolve_rules: Collection[str] = DRIFT_RULE_NAMES,
    cause: Mapping[str, Any] | None = None,
) -> list[Alert]:
    """Record the proposals as alerts and enqueue their notifications; return the fired alerts.

    `proposed`: ProposedAlert-like objects or dicts (severity, rule, kind, segment, summary,
    evidence). All are validated before anything is written (ProposalError names the bad one).
    With `resolve_absent`, open alerts of `resolve_rules` that did not fire are resolved.
    `cause`: the drift run's cause (`headline`, `order` of dedupe keys, ...), the drift
    incident's headline. The caller commits.
    """
    now = to_utc(now)
    rules = rules if rules is not None else load_rules(settings)
    proposals = [coerce_proposal(p, i) for i, p in enumerate(proposed)]
    decided = [(p, rules.decide(p, settings.alert_cooldown_s)) for p in proposals]
    fired: list[Alert] = []
    # muted proposals (decision None) drop out here, and so count as "not firing"
    for proposal, decision in _strongest_per_key([(p, d) for p, d in decided if d is not None]):
        key = dedupe_key(proposal.rule, proposal.segment)
        _lock_key(session, key)
        existing = session.scalars(
            select(Alert)
            .where(Alert.dedupe_key == key, Alert.status == "open")
            .order_by(Alert.id.desc())
            .limit(1)
        ).first()
        plan = plan_firing(existing, run_id=run_id)
        if existing is None:  # plan.create
            alert = Alert(
                dedupe_key=key,
                rule=proposal.rule,
                segment=proposal.segment,
                status="open",
                first_seen=now,
                occurrences=1,
            )
            session.add(alert)
        else:
            alert = existing
            if plan.count:
                alert.occurrences += 1
        alert.kind, alert.severity = decision.kind, decision.severity
        alert.summary, alert.evidence = proposal.summary, proposal.evidence
        alert.last_seen = now
        if run_id is not None:
            alert.run_id = run_id
        fired.append(alert)
    session.flush()

    # members never notify on their own: their incident does, once (alerts.incidents)
    for incident in incidents.attach(session, fired, run_id=run_id, now=now, cause=cause):
        incidents.notify(session, incident, now=now, settings=settings, rules=rules)

    # processed in key order (locks), returned in the order proposed
    position = {dedupe_key(p.rule, p.segment): i for i, p in reversed(list(enumerate(proposals)))}
    fired.sort(key=lambda a: position[a.dedupe_key])

    if resolve_absent:
        firing = {a.dedupe_key for a in fired}
        stale = session.scalars(
            select(Alert).where(Alert.status == "open", Alert.rule.in_(sorted(resolve_rules)))
        ).all()
        for alert in stale:
            if alert.dedupe_key not in firing:
                resolve_member(session, alert, now=now, settings=settings, rules=rules)
    session.flush()
    return fired


def raise_condition(
    session: Session,
    rule_id: str,
    segment: str = ALL_SEGMENTS,
    evidence: Mapping[str, Any] | None = None,
    *,
    healthy: bool,
    now: datetime,
    settings: Settings,
    summary: str | None = None,
    rules: RuleSet | None = None,
) -> Alert | None:
    """Report the state of one condition rule (`vigil.alert_table`) for one segment.

    Unhealthy: raise its alert through the same tiered path as drift alerts (rules file, dedupe,
    cooldown, outbox). Healthy: resolve its open alert, if any, with a resolve notification.
    Returns the alert raised or resolved; None when healthy with nothing open, or when the rules
    file mutes it. KeyError for a name that is not a condition rule. The caller commits.
    """
    rule = condition_rule(rule_id)
    if not healthy:
        proposal = {"severity": rule.severity, "rule": rule.name, "kind": rule.kind,
                    "segment": segment, "summary": summary or f"{rule.description} [{segment}]",
                    "evidence": dict(evidence or {})}  # fmt: skip
        fired = raise_alerts(session, [proposal], run_id=None, now=now, settings=settings,
                             rules=rules, resolve_absent=False)  # fmt: skip
        return fired[0] if fired else None
    key = dedupe_key(rule.name, segment)
    _lock_key(session, key)
    open_alerts = session.scalars(
        select(Alert).where(Alert.dedupe_key == key, Alert.status == "open").order_by(Alert.id)
    ).all()
    if not open_alerts:
        return None
    rules = rules if rules is not None else load_rules(settings)
    for alert in open_alerts:
        resolve_member(session, alert, now=to_utc(now), settings=settings, rules=rules)
    session.flush()
    return open_alerts[-1]


def resolve_alert(
    session: Session,
    alert_id: int,
    *,
    now: datetime,
    settings: Settings,
    rules: RuleSet | None = None,
) -> Alert:
    """Resolve one alert by hand (the sidecar's API); resolving a resolved alert is a no-op."""
    alert = session.get(Alert, alert_id)
    if alert is None:
        raise LookupError(f"alert {alert_id} does not exist")
    if alert.status == "open":
        rules = rules if rules is not None else load_rules(settings)
        resolve_member(session, alert, now=to_utc(now), settings=settings, rules=rules)
        session.flush()
    return alert


def list_alerts(
    session: Session,
    *,
    status: str | None = None,
    severity: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> list[Alert]:
    """Newest first (by last_seen), optionally filtered by status (open|resolved) and severity."""
    query = select(Alert)
    if status is not None:
        query = query.where(Alert.status == status)
    if severity is not None:
        query = query.where(Alert.severity == severity)
    query = query.order_by(Alert.last_seen.desc(), Alert.id.desc()).limit(limit).offset(offset)
    return list(session.scalars(query))


def get_alert(session: Session, alert_id: int) -> Alert | None:
    return session.get(Alert, alert_id)


def deliveries_for_alert(session: Session, alert_id: int) -> list[Delivery]:
    """The notifications that spoke for the alert: its incident's (and any of its own)."""
    alert = session.get(Alert, alert_id)
    spoke = Delivery.alert_id == alert_id
    if alert is not None and alert.incident_id is not None:
        spoke = or_(spoke, Delivery.incident_id == alert.incident_id)
    return list(session.scalars(select(Delivery).where(spoke).order_by(Delivery.id)))


def count_open_alerts(session: Session) -> dict[str, int]:
    """Open alerts per severity (for the dashboard's header and metrics)."""
    rows = session.execute(
        select(Alert.severity, func.count()).where(Alert.status == "open").group_by(Alert.severity)
    )
    return {severity: count for severity, count in rows}


def resolve_member(
    session: Session, alert: Alert, *, now: datetime, settings: Settings, rules: RuleSet
) -> None:
    """Resolve a member; its incident resolves (one resolve notification) with its last member."""
    alert.status = "resolved"
    incidents.close_if_done(session, alert.incident_id, now=now, settings=settings, rules=rules)


def _lock_key(session: Session, key: str) -> None:
    """Two sidecars firing the same rule at once must not both create an alert: on PostgreSQL a
    transaction-scoped advisory lock on the key serialises them (SQLite serialises writers)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(
            text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": "vigil-alert:" + key}
        )


def _strongest_per_key(
    decided: list[tuple[Proposal, Decision]],
) -> list[tuple[Proposal, Decision]]:
    """Several proposals for one rule + segment in one call: keep the most severe after the rules
    (the first wins ties), so one firing makes one alert update and at most one notification."""
    best: dict[str, tuple[Proposal, Decision]] = {}
    for proposal, decision in decided:
        key = dedupe_key(proposal.rule, proposal.segment)
        rank = SEVERITY_RANK[decision.severity]
        if key not in best or rank > SEVERITY_RANK[best[key][1].severity]:
            best[key] = (proposal, decision)
    # sorted by key: concurrent callers take the PostgreSQL advisory locks in one order
    # (no deadlock)
    return [best[key] for key in sorted(best)]
