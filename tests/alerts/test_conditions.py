"""raise_condition: the monitor's and the engine's conditions go through the same tiered path as
drift alerts (dedupe, cooldown, routes, outbox) and resolve when reported healthy."""

from __future__ import annotations

from datetime import timedelta

import pytest
from alert_helpers import T0, make_settings
from sqlalchemy import func, select

from alerts.rules_file import parse_rules
from alerts.service import deliveries_for_alert, list_alerts, raise_condition
from storage.models import Alert, Delivery
from vigil.alert_table import DEFAULT_RULES

CONDITIONS = [r for r in DEFAULT_RULES if r.test is None]


def _report(sessions, settings, rule_id, now, *, healthy, segment="*", **kw):
    with sessions() as s, s.begin():
        alert = raise_condition(
            s, rule_id, segment, {"age_s": 900}, healthy=healthy, now=now, settings=settings, **kw
        )
        return None if alert is None else (alert.id, alert.status, alert.occurrences)


def _count(sessions, model) -> int:
    with sessions() as s:
        return s.scalar(select(func.count()).select_from(model))


def test_raise_dedupe_resolve(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"], alert_cooldown_s=3600)
    first = _report(sessions, settings, "monitor_window_failed", T0, healthy=False)
    assert first[1:] == ("open", 1)
    assert _count(sessions, Alert) == 1 and _count(sessions, Delivery) == 1
    # still failing ten minutes later: the same alert counts it, no second message
    again = _report(sessions, settings, "monitor_window_failed", T0 + timedelta(minutes=10),
                    healthy=False)  # fmt: skip
    assert again == (first[0], "open", 2)
    assert _count(sessions, Alert) == 1 and _count(sessions, Delivery) == 1
    # healthy: resolved, and the target hears about it
    done = _report(sessions, settings, "monitor_window_failed", T0 + timedelta(minutes=20),
                   healthy=True)  # fmt: skip
    assert done == (first[0], "resolved", 2)
    with sessions() as s:
        rows = deliveries_for_alert(s, first[0])
        assert [r.payload["event"] for r in rows] == ["trigger", "resolve"]
        alert = s.get(Alert, first[0])
        assert (alert.severity, alert.kind, alert.segment) == ("high", "monitoring", "*")
        assert alert.evidence == {"age_s": 900}
    # healthy again with nothing open: nothing to do
    assert _report(sessions, settings, "monitor_window_failed", T0 + timedelta(hours=1),
                   healthy=True) is None  # fmt: skip
    assert _count(sessions, Delivery) == 2


@pytest.mark.parametrize("rule", CONDITIONS, ids=lambda r: r.name)
def test_every_condition_rule_raises_at_its_tier_and_resolves(sessions, alerts_db, rule):
    settings = make_settings(alerts_db, [])
    raised = _report(sessions, settings, rule.name, T0, healthy=False, segment="embed")
    with sessions() as s:
        (alert,) = list_alerts(s)
        assert (alert.rule, alert.segment, alert.severity, alert.kind) == (
            rule.name, "embed", rule.severity, rule.kind)  # fmt: skip
        assert alert.summary == f"{rule.description} [embed]"
    resolved = _report(sessions, settings, rule.name, T0 + timedelta(minutes=1), healthy=True,
                       segment="embed")  # fmt: skip
    assert resolved == (raised[0], "resolved", 1)


def test_segments_are_separate_alerts(sessions, alerts_db):
    settings = make_settings(alerts_db, [])
    embed = _report(sessions, settings, "monitor_backlog", T0, healthy=False, segment="embed")
    evals = _report(sessions, settings, "monitor_backlog", T0, healthy=False, segment="eval")
    assert embed[0] != evals[0]
    _report(sessions, settings, "monitor_backlog", T0, healthy=True, segment="embed")
    with sessions() as s:
        assert {a.segment: a.status for a in list_alerts(s)} == {
            "embed": "resolved", "eval": "open"}  # fmt: skip


def test_rules_file_retiers_and_mutes_conditions(sessions, alerts_db):
    settings = make_settings(alerts_db, [])
    rules = parse_rules(
        {"rules": [{"match": {"rule": "canary_mismatch"}, "severity": "critical"},
                   {"match": {"kind": "monitoring"}, "enabled": False}]},
        settings,
    )  # fmt: skip
    raised = _report(sessions, settings, "canary_mismatch", T0, healthy=False, rules=rules)
    assert raised is not None
    muted = _report(sessions, settings, "monitor_leader_lost", T0, healthy=False, rules=rules)
    assert muted is None
    with sessions() as s:
        assert [(a.rule, a.severity) for a in list_alerts(s)] == [("canary_mismatch", "critical")]


def test_unknown_or_drift_rule_ids_are_refused(sessions, alerts_db):
    settings = make_settings(alerts_db, [])
    for name in ("monitor_typo", "token_psi"):
        with pytest.raises(KeyError, match="is not a condition rule"), sessions() as s:
            raise_condition(s, name, healthy=False, now=T0, settings=settings)
    assert _count(sessions, Alert) == 0


def test_an_alert_for_the_longest_segment_label(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    label = "model_version=" + "m" * 128
    raised = _report(sessions, settings, "monitor_window_failed", T0, healthy=False, segment=label)
    assert raised[1:] == ("open", 1)
    with sessions() as s:
        assert s.scalars(select(Alert.segment)).all() == [label]
