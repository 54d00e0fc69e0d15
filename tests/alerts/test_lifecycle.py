"""Acknowledge, snooze and resolve-with-note (SQLite and PostgreSQL): who/when recorded, an
acknowledged or snoozed alert is not re-notified at the same severity, a severity change is."""

from __future__ import annotations

from datetime import timedelta

import pytest
from alert_helpers import T0, make_run, make_settings, proposal
from sqlalchemy import func, select

from alerts.lifecycle import LifecycleError, acknowledge, actions, resolve, snooze
from alerts.quieted import silenced
from alerts.service import raise_alerts
from storage.models import Alert, Delivery

HOUR = timedelta(hours=1)


def fire(sessions, settings, now, severity="moderate") -> int:
    with sessions() as s, s.begin():
        run_id = make_run(s, now)
        fired = raise_alerts(
            s,
            [proposal(severity=severity)],
            run_id=run_id,
            now=now,
            settings=settings,
            resolve_absent=False,
        )
        return fired[0].id


def triggers(sessions, alert_id) -> int:
    with sessions() as s:
        return s.scalar(
            select(func.count())
            .select_from(Delivery)
            .where(
                Delivery.incident_id == s.get(Alert, alert_id).incident_id,
                Delivery.idempotency_key.contains("-trigger-"),
            )
        )


def test_acknowledged_alert_stays_quiet_until_its_severity_changes(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"])  # cooldown 1 h
    alert_id = fire(sessions, settings, T0)
    assert triggers(sessions, alert_id) == 1
    with sessions() as s, s.begin():
        acknowledge(s, alert_id, actor="alice", now=T0 + timedelta(minutes=5), note="looking")
    # same severity: no new notification
    assert fire(sessions, settings, T0 + 2 * HOUR) == alert_id
    assert fire(sessions, settings, T0 + 4 * HOUR) == alert_id
    assert triggers(sessions, alert_id) == 1
    # escalation: notified at once
    fire(sessions, settings, T0 + 5 * HOUR, severity="critical")
    assert triggers(sessions, alert_id) == 2
    with sessions() as s:
        row = s.get(Alert, alert_id)
        assert row.occurrences == 4 and row.acknowledged_by == "alice"
        history = actions(s, alert_id)
        assert [(a.action, a.actor, a.severity, a.note) for a in history] == [
            ("acknowledge", "alice", "moderate", "looking")
        ]


def test_snooze_silences_until_its_end(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    alert_id = fire(sessions, settings, T0)
    with sessions() as s, s.begin():
        snooze(s, alert_id, actor="bob", until=T0 + 5 * HOUR, now=T0)
    fire(sessions, settings, T0 + 2 * HOUR, severity="high")  # a rise inside the snooze: quiet
    assert triggers(sessions, alert_id) == 1
    fire(sessions, settings, T0 + 6 * HOUR, severity="high")  # snooze over: the rise is told
    assert triggers(sessions, alert_id) == 2
    fire(sessions, settings, T0 + 8 * HOUR, severity="high")  # same severity: never re-sent
    assert triggers(sessions, alert_id) == 2
    with sessions() as s:
        (action,) = actions(s, alert_id)
        assert action.action == "snooze" and action.until == T0 + 5 * HOUR and action.at == T0


def test_resolve_with_note_sends_the_resolve_and_records_it(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    alert_id = fire(sessions, settings, T0)
    with sessions() as s, s.begin():
        resolve(
            s,
            alert_id,
            actor="carol",
            now=T0 + HOUR,
            settings=settings,
            note="rolled back prompt v7",
        )
    with sessions() as s:
        assert s.get(Alert, alert_id).status == "resolved"
        assert (
            s.scalar(
                select(func.count())
                .select_from(Delivery)
                .where(
                    Delivery.alert_id == alert_id, Delivery.idempotency_key.contains("-resolve-")
                )
            )
            == 1
        )
        (action,) = actions(s, alert_id)
        assert (action.action, action.actor, action.note) == (
            "resolve",
            "carol",
            "rolled back prompt v7",
        )
    with sessions() as s, pytest.raises(LifecycleError, match="resolved"):
        acknowledge(s, alert_id, actor="x", now=T0 + 2 * HOUR)


def test_bad_actions_are_refused(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    alert_id = fire(sessions, settings, T0)
    with sessions() as s:
        with pytest.raises(LifecycleError, match="future"):
            snooze(s, alert_id, actor="x", until=T0, now=T0)
        with pytest.raises(LifecycleError, match="30 days"):
            snooze(s, alert_id, actor="x", until=T0 + timedelta(days=31), now=T0)
        with pytest.raises(LookupError):
            acknowledge(s, 987654, actor="x", now=T0)


def test_silenced_rules():
    class A:
        acknowledged_at = None
        snoozed_until = T0 + HOUR
        silenced_severity = "high"

    assert silenced(A, "high", T0) and not silenced(A, "high", T0 + HOUR)
    assert silenced(A, "critical", T0) and not silenced(
        None, "high", T0
    )  # a snooze holds a rise too
    A.acknowledged_at = T0
    assert silenced(A, "high", T0 + 10 * HOUR) and not silenced(A, "moderate", T0 + HOUR)
