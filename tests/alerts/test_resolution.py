"""Which open alerts a drift run resolves: every drift rule of the table (latency included),
never a condition rule (those resolve through raise_condition)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from alert_helpers import T0, make_run, make_settings

from alerts.service import list_alerts, raise_alerts, raise_condition
from drift.alerting.custom_rules import DEFAULT_RULES
from drift.alerting.proposals import propose_alerts
from drift.result import TestResult
from vigil.alert_table import DRIFT_RULES


def _window(sessions, settings, proposed, now):
    with sessions() as s, s.begin():
        run_id = make_run(s, now)
        raise_alerts(s, proposed, run_id=run_id, now=now, settings=settings)


def _statuses(sessions) -> dict[str, str]:
    with sessions() as s:
        return {a.rule: a.status for a in list_alerts(s)}


def test_latency_alert_resolves_when_the_next_window_is_healthy(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    slow = [TestResult("psi", 0.4, None, 0.25, True, feature="ttft_ms")]
    proposed = propose_alerts(slow, DEFAULT_RULES)
    assert [(p.rule, p.kind) for p in proposed] == [("latency_psi", "operational")]
    _window(sessions, settings, proposed, T0)
    _window(sessions, settings, [], T0 + timedelta(hours=1))
    assert _statuses(sessions) == {"latency_psi": "resolved"}


@pytest.mark.parametrize("rule", DRIFT_RULES, ids=lambda r: r.name)
def test_every_drift_rule_resolves_when_absent(sessions, alerts_db, rule):
    settings = make_settings(alerts_db, [])
    proposal = {"severity": rule.severity, "rule": rule.name, "kind": rule.kind, "segment": "*"}
    _window(sessions, settings, [proposal], T0)
    _window(sessions, settings, [], T0 + timedelta(hours=1))
    assert _statuses(sessions) == {rule.name: "resolved"}


def test_a_drift_run_leaves_condition_alerts_open(sessions, alerts_db):
    settings = make_settings(alerts_db, [])
    with sessions() as s, s.begin():
        raise_condition(s, "monitor_backlog", "embed", healthy=False, now=T0, settings=settings)
    _window(sessions, settings, [], T0 + timedelta(hours=1))
    assert _statuses(sessions) == {"monitor_backlog": "open"}
