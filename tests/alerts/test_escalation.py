"""Escalation (SQLite and PostgreSQL): an unacknowledged incident is re-sent to the targets that
heard it every `repeat_interval_s`, and after `after_s` is paged to the escalation target once;
acknowledging stops both. Bad `escalation` entries are refused naming the entry."""

from __future__ import annotations

from datetime import timedelta

import pytest
from alert_helpers import T0, make_run, make_settings, proposal
from sqlalchemy import select

from alerts import incident_lifecycle
from alerts.escalation import escalate_due
from alerts.rules_file import RulesError, parse_rules
from alerts.service import raise_alerts
from storage.models import Delivery, Incident

MIN = timedelta(minutes=1)
CHAT = {"url": "http://127.0.0.1:9/chat", "format": "slack"}
BOSS = {"url": "http://127.0.0.1:9/boss", "format": "pagerduty", "routing_key": "k"}
POLICY = {"high": {"repeat_interval_s": 3600, "after_s": 1800, "to": ["boss"]}}


def sent(sessions) -> list[tuple[str, str]]:
    with sessions() as s:
        rows = s.scalars(select(Delivery).order_by(Delivery.id))
        return [(d.target.rsplit("/", 1)[1], d.format) for d in rows]


def test_repeat_then_escalate_until_acknowledged(sessions, alerts_db):
    conf = make_settings(alerts_db, [])
    rules = parse_rules({"targets": {"chat": CHAT, "boss": BOSS},
                         "routes": {"high": ["chat"]}, "escalation": POLICY}, conf)  # fmt: skip
    with sessions() as s, s.begin():
        raise_alerts(s, [proposal(rule="prompt_cluster_mix", severity="high")],
                     run_id=make_run(s, T0), now=T0, settings=conf, rules=rules)  # fmt: skip
    assert [t for t, _ in sent(sessions)] == ["chat"]

    def tick(minutes: int) -> None:
        with sessions() as s, s.begin():
            escalate_due(s, now=T0 + minutes * MIN, settings=conf, rules=rules)

    tick(10)  # neither due
    assert len(sent(sessions)) == 1
    tick(31)  # unacknowledged for 30 min: the boss is paged, once
    tick(32)
    assert [t for t, _ in sent(sessions)] == ["chat", "boss"]
    tick(31 + 60)  # an hour after the last notification: re-sent to everyone told
    assert sorted(t for t, _ in sent(sessions)[2:]) == ["boss", "chat"]
    with sessions() as s, s.begin():
        (incident,) = s.scalars(select(Incident)).all()
        incident_lifecycle.acknowledge(s, incident.id, actor="alice", now=T0 + 100 * MIN)
    tick(300)
    assert len(sent(sessions)) == 4  # acknowledged: quiet
    with sessions() as s:
        keys = [d.idempotency_key for d in s.scalars(select(Delivery))]
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize(
    "escalation, message",
    [
        ({"urgent": {}}, "unknown severity"),
        ({"high": {"repeat_interval_s": 5}}, "at least 60"),
        ({"high": {"to": ["boss"]}}, "needs `after_s`"),
        ({"high": {"after_s": 600, "to": ["nobody"]}}, "nobody"),
        ({"high": {"every": 3}}, "expected a mapping with keys"),
    ],
)
def test_bad_escalation_is_refused(escalation, message):
    conf = make_settings("sqlite://", [])
    with pytest.raises(RulesError, match=message):
        parse_rules({"targets": {"boss": BOSS}, "escalation": escalation}, conf)
