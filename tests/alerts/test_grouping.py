"""One notification per event: a run's alerts of one rule in several segments reach each
generic/Slack target as one delivery listing the segments; each member still dedupes and
resolves on its own; PagerDuty stays one incident per alert (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import timedelta

from alert_helpers import T0, make_run, make_settings, proposal
from sqlalchemy import select

from alerts.rules import parse_rules
from alerts.service import raise_alerts
from storage.models import Alert, Delivery

HOUR = timedelta(hours=1)


def window(sessions, settings, proposed, now, rules=None):
    with sessions() as s, s.begin():
        run_id = make_run(s, now)
        raise_alerts(s, proposed, run_id=run_id, now=now, settings=settings, rules=rules)
        return run_id


def deliveries(sessions) -> list[Delivery]:
    with sessions() as s:
        return list(s.scalars(select(Delivery).order_by(Delivery.id)))


def test_one_delivery_lists_the_segments_and_members_resolve_alone(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    segs = ["segment=web", "segment=api", "segment=batch"]
    run_id = window(sessions, settings, [proposal(rule="token_psi", segment=s, severity="high" if s == "segment=api"
                                                  else "moderate") for s in segs]
                    + [proposal(rule="latency_psi", segment="segment=web")], T0)
    sent = deliveries(sessions)
    assert len(sent) == 2  # one per (rule, target), not one per alert
    grouped = next(d for d in sent if "group" in d.payload)
    group = grouped.payload["group"]
    assert group["key"] == f"run-{run_id}:token_psi" and group["size"] == 3
    assert [m["segment"] for m in group["members"]] == ["segment=api", "segment=batch", "segment=web"]  # most severe first
    assert grouped.payload["alert"]["segment"] == "segment=api"
    with sessions() as s:
        alerts = {a.segment: a for a in s.scalars(select(Alert).where(Alert.rule == "token_psi"))}
        assert len(alerts) == 3 and all(a.last_notified == T0 for a in alerts.values())
    # next window: only "web" still fires (cooldown not over: no trigger); the other two resolve alone
    window(sessions, settings, [proposal(rule="token_psi", segment="segment=web")], T0 + HOUR)
    resolves = [d for d in deliveries(sessions)
                if d.payload["event"] == "resolve" and d.payload["alert"]["rule"] == "token_psi"]
    assert sorted(d.payload["alert"]["segment"] for d in resolves) == ["segment=api", "segment=batch"]
    with sessions() as s:
        status = {a.segment: a.status for a in s.scalars(select(Alert).where(Alert.rule == "token_psi"))}
    assert status == {"segment=web": "open", "segment=api": "resolved", "segment=batch": "resolved"}


def test_slack_is_grouped_and_pagerduty_is_not(sessions, alerts_db):
    settings = make_settings(alerts_db, [])
    rules = parse_rules({"targets": {
        "chat": {"url": "http://127.0.0.1:9/slack", "format": "slack"},
        "pd": {"url": "http://127.0.0.1:9/pd", "format": "pagerduty", "routing_key": "k"}},
        "routes": {"moderate": ["chat", "pd"]}}, settings)
    window(sessions, settings, [proposal(rule="token_psi", segment=s) for s in ("segment=a", "segment=b")], T0,
           rules=rules)
    by_format: dict[str, list[Delivery]] = {}
    for d in deliveries(sessions):
        by_format.setdefault(d.format, []).append(d)
    assert len(by_format["pagerduty"]) == 2
    (slack,) = by_format["slack"]
    assert slack.payload["text"].startswith("[2 segments: segment=a, segment=b]")
    assert any("*2 segments*" in (b.get("text") or {}).get("text", "") for b in slack.payload["blocks"])
