"""What on-call does with an alert: acknowledge it, snooze it until a time, resolve it with a
note. Each action is recorded (who, when, at which severity) in `alert_actions`.

Notifications belong to incidents (`alerts.incidents`), which are told once per severity: an
acknowledged alert or incident is not re-notified at the severity it was acknowledged at (a rise
still pages); a snoozed one is not notified at all, a rise included, until the snooze ends
(`alerts.quieted.silenced`). Functions take the caller's session and never commit.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from alerts.rules_file import RuleSet
from alerts.service import resolve_alert
from storage.models import Alert, AlertAction
from storage.types import to_utc
from vigil.config import Settings

MAX_SNOOZE = timedelta(days=30)
MAX_NOTE_CHARS = 2000
MAX_ACTOR_CHARS = 128


class LifecycleError(ValueError):
    """The action does not apply (unknown alert, already resolved, a snooze in the past)."""


def _open_alert(session: Session, alert_id: int) -> Alert:
    alert = session.get(Alert, alert_id)
    if alert is None:
        raise LookupError(f"alert {alert_id} does not exist")
    if alert.status != "open":
        raise LifecycleError(
            f"alert {alert_id} is {alert.status}; only an open alert can be changed"
        )
    return alert


def record(
    session: Session,
    alert: Alert,
    action: str,
    *,
    actor: str,
    now: datetime,
    note: str | None = None,
    until: datetime | None = None,
) -> AlertAction:
    row = AlertAction(
        alert_id=alert.id,
        action=action,
        actor=(actor or "unknown")[:MAX_ACTOR_CHARS],
        at=to_utc(now),
        severity=alert.severity,
        until=until,
        note=(note or None) and note[:MAX_NOTE_CHARS],
    )
    session.add(row)
    session.flush()
    return row


def acknowledge(
    session: Session, alert_id: int, *, actor: str, now: datetime, note: str | None = None
) -> Alert:
    alert = _open_alert(session, alert_id)
    alert.acknowledged_at, alert.acknowledged_by = to_utc(now), actor[:MAX_ACTOR_CHARS]
    alert.silenced_severity = alert.severity
    record(session, alert, "acknowledge", actor=actor, now=now, note=note)
    return alert


def check_snooze(until: datetime, now: datetime) -> tuple[datetime, datetime]:
    until, now = to_utc(until), to_utc(now)
    if until <= now:
        raise LifecycleError("a snooze must end in the future")
    if until - now > MAX_SNOOZE:
        raise LifecycleError(f"a snooze may last at most {MAX_SNOOZE.days} days")
    return until, now


def snooze(
    session: Session,
    alert_id: int,
    *,
    actor: str,
    until: datetime,
    now: datetime,
    note: str | None = None,
) -> Alert:
    until, now = check_snooze(until, now)
    alert = _open_alert(session, alert_id)
    alert.snoozed_until, alert.silenced_severity = until, alert.severity
    record(session, alert, "snooze", actor=actor, now=now, note=note, until=until)
    return alert


def resolve(
    session: Session,
    alert_id: int,
    *,
    actor: str,
    now: datetime,
    settings: Settings,
    note: str | None = None,
    rules: RuleSet | None = None,
) -> Alert:
    """Resolve by hand: its targets get the resolve notification, the note goes in the history."""
    alert = _open_alert(session, alert_id)
    record(session, alert, "resolve", actor=actor, now=now, note=note)
    return resolve_alert(session, alert_id, now=now, settings=settings, rules=rules)


def actions(session: Session, alert_id: int) -> list[AlertAction]:
    return list(
        session.scalars(
            select(AlertAction)
            .where(AlertAction.alert_id == alert_id)
            .order_by(AlertAction.at, AlertAction.id)
        )
    )
