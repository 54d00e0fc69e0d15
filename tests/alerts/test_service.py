"""raise_alerts on SQLite and PostgreSQL: dedupe, cooldown, escalation, resolution, outbox."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from alert_helpers import T0, make_run, make_settings, proposal
from sqlalchemy import func, select

from alerts.proposal import ProposalError
from alerts.rules_file import parse_rules
from alerts.service import (
    deliveries_for_alert,
    list_alerts,
    raise_alerts,
    resolve_alert,
)
from storage.models import Alert, Delivery


def _raise(sessions, settings, proposed, now, **kw):
    with sessions() as s, s.begin():
        run_id = make_run(s, now)
        alerts = raise_alerts(s, proposed, run_id=run_id, now=now, settings=settings, **kw)
        return [(a.id, a.occurrences, a.severity) for a in alerts], run_id


def _count(sessions, model, **where):
    with sessions() as s:
        query = select(func.count()).select_from(model)
        for name, value in where.items():
            query = query.where(getattr(model, name) == value)
        return s.scalar(query)


def test_new_alert_enqueues_one_delivery_per_routed_target(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b"])
    fired, run_id = _raise(sessions, settings, [proposal(statistic=0.4)], T0)
    assert len(fired) == 1
    with sessions() as s:
        alert = s.get(Alert, fired[0][0])
        assert (alert.status, alert.occurrences, alert.run_id) == ("open", 1, run_id)
        assert alert.first_seen == T0 == alert.last_seen == alert.last_notified
        rows = deliveries_for_alert(s, alert.id)
    assert sorted(r.target for r in rows) == ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b"]
    assert all(r.status == "pending" and r.next_attempt_at == T0 and r.attempts == 0 for r in rows)
    assert len({r.idempotency_key for r in rows}) == 2
    assert rows[0].payload["alert"]["url"] == f"http://vigil.test:8001/alerts/{alert.id}"
    assert rows[0].payload["alert"]["report_url"] == f"http://vigil.test:8001/reports/{run_id}"


def test_dedupe_updates_the_open_alert_and_its_incident_is_told_once(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"], alert_cooldown_s=0)
    first, _ = _raise(sessions, settings, [proposal(statistic=0.4)], T0)
    # an hour-ly drift job fires again 30 min later: same alert, one more occurrence, no message
    again, run2 = _raise(sessions, settings, [proposal(statistic=0.5)], T0 + timedelta(minutes=30))
    assert again[0][0] == first[0][0] and again[0][1] == 2
    assert _count(sessions, Alert) == 1 and _count(sessions, Delivery) == 1
    with sessions() as s:
        alert = s.get(Alert, first[0][0])
        assert alert.evidence["statistic"] == 0.5 and alert.run_id == run2
        assert alert.last_seen == T0 + timedelta(minutes=30) and alert.last_notified == T0
    # hours later, same severity: still one notification (re-sent only on a rise or the resolve)
    later, _ = _raise(sessions, settings, [proposal(statistic=0.6)], T0 + timedelta(hours=5))
    assert later[0][:2] == (first[0][0], 3)
    with sessions() as s:
        assert len(deliveries_for_alert(s, first[0][0])) == 1
    # a rise is told at once, under a new idempotency key
    _raise(sessions, settings, [proposal(statistic=0.9, severity="high")], T0 + timedelta(hours=6))
    with sessions() as s:
        keys = [d.idempotency_key for d in deliveries_for_alert(s, first[0][0])]
        assert s.get(Alert, first[0][0]).last_notified == T0 + timedelta(hours=6)
    assert len(keys) == 2 and len(set(keys)) == 2


def test_other_segment_or_rule_is_another_alert(sessions, alerts_db):
    settings = make_settings(alerts_db, [])
    fired, _ = _raise(
        sessions,
        settings,
        [
            proposal(segment="tenant=a"),
            proposal(segment="tenant=b"),
            proposal(rule="prompt_embedding_mmd"),
        ],
        T0,
    )
    assert len({f[0] for f in fired}) == 3
    assert _count(sessions, Delivery) == 0  # no targets configured: recorded, not sent


def test_escalation_notifies_at_once(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    _raise(sessions, settings, [proposal(rule="eval_drop", kind="eval", severity="high")], T0)
    fired, _ = _raise(
        sessions,
        settings,
        [proposal(rule="eval_drop", kind="eval", severity="critical")],
        T0 + timedelta(minutes=5),
    )
    assert fired[0][2] == "critical"
    assert _count(sessions, Delivery) == 2
    # and back down: recorded, no new message
    _raise(
        sessions,
        settings,
        [proposal(rule="eval_drop", kind="eval", severity="high")],
        T0 + timedelta(minutes=10),
    )
    assert _count(sessions, Delivery) == 2


def test_same_run_processed_twice_counts_once(sessions, alerts_db):
    """A drift job re-run after a crash re-raises its run's alerts: no double count or message."""
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"], alert_cooldown_s=0)
    with sessions() as s, s.begin():
        run_id = make_run(s, T0)
    for _ in range(2):
        with sessions() as s, s.begin():
            raise_alerts(s, [proposal()], run_id=run_id, now=T0, settings=settings)
    with sessions() as s:
        (alert,) = list_alerts(s)
        assert alert.occurrences == 1
    assert _count(sessions, Delivery) == 1


def test_rule_that_stops_firing_is_resolved_and_closed_downstream(sessions, alerts_db):
    rules = parse_rules(
        {
            "targets": {
                "pd": {"url": "http://127.0.0.1:9/pd", "format": "pagerduty", "routing_key": "k"}
            },
            "routes": {"high": ["pd"]},
        },
        make_settings(alerts_db, []),
    )
    settings = make_settings(alerts_db, [])
    drift = proposal(rule="response_embedding_mmd", kind="model", severity="high")
    stale_reminder = proposal(rule="baseline_stale", kind="operational", severity="review")
    fired, _ = _raise(sessions, settings, [drift, stale_reminder], T0, rules=rules)
    # next hour nothing fires: the drift alert resolves, the operational reminder stays open
    _raise(sessions, settings, [], T0 + timedelta(hours=1), rules=rules)
    with sessions() as s:
        assert {a.rule: a.status for a in list_alerts(s)} == {
            "response_embedding_mmd": "resolved",
            "baseline_stale": "open",
        }
        events = [d.payload["event_action"] for d in deliveries_for_alert(s, fired[0][0])]
        assert events == ["trigger", "resolve"]
    # firing again later opens a NEW alert: the resolved one is history
    again, _ = _raise(sessions, settings, [drift], T0 + timedelta(hours=2), rules=rules)
    assert again[0][0] != fired[0][0] and again[0][1] == 1
    # manual resolution (the sidecar's API) of the reminder
    with sessions() as s, s.begin():
        reminder = next(a for a in list_alerts(s) if a.rule == "baseline_stale")
        assert (
            resolve_alert(
                s, reminder.id, now=T0 + timedelta(hours=3), settings=settings, rules=rules
            ).status
            == "resolved"
        )
        with pytest.raises(LookupError, match="alert 999999 does not exist"):
            resolve_alert(s, 999999, now=T0, settings=settings, rules=rules)


def test_alert_and_deliveries_commit_or_roll_back_together(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    with pytest.raises(RuntimeError, match="drift job crashed"), sessions() as s, s.begin():
        raise_alerts(s, [proposal()], run_id=None, now=T0, settings=settings)
        raise RuntimeError("drift job crashed before commit")
    assert _count(sessions, Alert) == 0 and _count(sessions, Delivery) == 0
    with sessions() as s, s.begin():
        raise_alerts(s, [proposal()], run_id=None, now=T0, settings=settings)
    assert _count(sessions, Alert) == 1 and _count(sessions, Delivery) == 1


def test_invalid_proposal_writes_nothing_and_objects_are_accepted(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    with (
        pytest.raises(ProposalError, match=r"proposed alert #1: severity 'urgent'"),
        sessions() as s,
        s.begin(),
    ):
        raise_alerts(
            s, [proposal(), proposal(severity="urgent")], run_id=None, now=T0, settings=settings
        )
    assert _count(sessions, Alert) == 0
    drift_object = SimpleNamespace(
        severity="review",
        rule="new_cluster",
        kind="persona",
        segment="*",
        summary="a new cluster: 14% of prompts ask about refunds",
        evidence={"size": 0.14},
    )
    fired, _ = _raise(sessions, settings, [drift_object], T0)
    with sessions() as s:
        assert s.get(Alert, fired[0][0]).summary.startswith("a new cluster")


def test_muted_rule_raises_nothing(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    rules = parse_rules({"rules": [{"match": {"rule": "new_cluster"}, "enabled": False}]}, settings)
    fired, _ = _raise(
        sessions, settings, [proposal(rule="new_cluster", kind="persona")], T0, rules=rules
    )
    assert fired == [] and _count(sessions, Alert) == 0


def test_drift_jobs_proposals_are_accepted_and_file_rules_match_their_results(sessions, alerts_db):
    """The contract with drift/: its ProposedAlert objects (evidence = {"rule": description,
    "results": [TestResult dicts]}) go in unchanged; a file rule matching test/feature applies."""
    from drift.alerting.custom_rules import DEFAULT_RULES
    from drift.alerting.proposals import propose_alerts
    from drift.result import TestResult

    results = [
        TestResult("psi", 0.41, None, 0.25, True, feature="prompt_tokens", segment="tenant=a"),
        TestResult("mmd", 0.03, 0.002, 0.05, True, feature="response_embedding"),
        TestResult("ks", 0.02, 0.6, 0.05, False, feature="latency_ms"),
    ]
    proposed = propose_alerts(results, DEFAULT_RULES)
    assert {(p.rule, p.segment) for p in proposed} == {
        ("token_psi", "tenant=a"),
        ("response_embedding_mmd", "*"),
    }
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    rules = parse_rules(
        {"rules": [{"match": {"test": "psi", "feature": "prompt_tokens"}, "severity": "high"}]},
        settings,
    )
    fired, _ = _raise(sessions, settings, proposed, T0, rules=rules)
    by_rule = {}
    with sessions() as s:
        for alert_id, _, _ in fired:
            alert = s.get(Alert, alert_id)
            by_rule[alert.rule] = alert
    assert by_rule["token_psi"].severity == "high"  # raised from moderate by the file rule
    assert by_rule["response_embedding_mmd"].severity == "high"
    assert by_rule["response_embedding_mmd"].kind == "model"
    assert by_rule["token_psi"].evidence["results"][0]["statistic"] == 0.41


def test_two_sidecars_raising_at_once_make_one_alert_on_postgresql(pg_url):
    """Without the advisory lock both transactions would see no open alert and insert one each."""
    import threading
    import time

    from storage.db import session_factory

    sessions = session_factory(pg_url)
    settings = make_settings(pg_url, ["http://127.0.0.1:9/a"], alert_cooldown_s=0)
    first_holds_lock = threading.Event()
    errors = []

    def first() -> None:
        try:
            with sessions() as s, s.begin():
                raise_alerts(s, [proposal()], run_id=None, now=T0, settings=settings)
                first_holds_lock.set()
                time.sleep(0.5)  # the second sidecar arrives while this one is uncommitted
        except Exception as exc:  # surfaced below
            errors.append(exc)

    thread = threading.Thread(target=first)
    thread.start()
    assert first_holds_lock.wait(10)
    with sessions() as s, s.begin():
        raise_alerts(s, [proposal()], run_id=None, now=T0 + timedelta(seconds=1), settings=settings)
    thread.join(10)
    assert errors == []
    with sessions() as s:
        (alert,) = list_alerts(s)
        assert alert.occurrences == 2


def test_duplicate_proposals_in_one_call_make_one_alert_at_the_highest_tier(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    rules = parse_rules(
        {
            "rules": [
                {"match": {"rule": "eval_drop", "segment": "tenant=vip"}, "severity": "critical"}
            ]
        },
        settings,
    )
    proposed = [
        proposal(rule="eval_drop", kind="eval", severity="high", segment="tenant=vip"),
        proposal(rule="eval_drop", kind="eval", severity="moderate", segment="tenant=vip"),
    ]
    fired, _ = _raise(sessions, settings, proposed, T0, rules=rules)
    assert [f[1:] for f in fired] == [(1, "critical")]
    assert _count(sessions, Alert) == 1 and _count(sessions, Delivery) == 1
