"""Incidents (SQLite and PostgreSQL): one drift run's firing alerts page once per target, with
the run's cause as headline and one PagerDuty dedup key; re-sent only on a rise or the resolve;
a failing canary inhibits model/eval drift; on-call actions on the incident reach its members."""

from __future__ import annotations

from datetime import timedelta

import pytest
from alert_helpers import T0, make_run, make_settings, proposal
from sqlalchemy import select

from alerts import incident_lifecycle
from alerts.lifecycle import LifecycleError, actions
from alerts.rules_file import parse_rules
from alerts.service import raise_alerts, raise_condition
from storage.models import Alert, Delivery, Incident

HOUR = timedelta(hours=1)
PD = {"url": "http://127.0.0.1:9/pd", "format": "pagerduty", "routing_key": "k"}
CHAT = {"url": "http://127.0.0.1:9/chat", "format": "slack"}
CAUSE = {
    "headline": "New tenant newco (mobile) is 40 % of traffic since 11:10 UTC",
    "order": ["new_segment|tenant=newco", "token_psi|tenant=newco", "prompt_cluster_mix|*"],
}


def event(sessions, settings, proposed, now, rules=None, cause=CAUSE):
    with sessions() as s, s.begin():
        run_id = make_run(s, now)
        raise_alerts(
            s, proposed, run_id=run_id, now=now, settings=settings, rules=rules, cause=cause
        )


def deliveries(sessions) -> list[Delivery]:
    with sessions() as s:
        return list(s.scalars(select(Delivery).order_by(Delivery.id)))


def incidents(sessions) -> list[Incident]:
    with sessions() as s:
        return list(s.scalars(select(Incident).order_by(Incident.id)))


def nine_rules():
    return [
        proposal(rule="prompt_cluster_mix", severity="high"),
        proposal(rule="new_segment", kind="persona", severity="review", segment="tenant=newco"),
        proposal(rule="new_prompt_version", segment="*"),
        proposal(rule="token_psi", segment="tenant=newco"),
        proposal(rule="latency_psi", kind="operational", segment="segment=mobile"),
        proposal(rule="new_cluster", kind="persona", severity="review"),
    ]


def test_one_run_pages_once_per_target_with_the_cause_and_one_dedup_key(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    rules = parse_rules(
        {
            "targets": {"pd": PD, "chat": CHAT},
            "routes": {"high": ["pd", "chat", "default"], "moderate": ["chat", "default"]},
        },
        settings,
    )
    event(sessions, settings, nine_rules(), T0, rules)
    (incident,) = incidents(sessions)
    rows = deliveries(sessions)
    assert sorted(r.format for r in rows) == ["generic", "pagerduty", "slack"]  # one per target
    assert incident.headline == CAUSE["headline"] and incident.severity == "high"
    pd = next(r.payload for r in rows if r.format == "pagerduty")
    assert pd["dedup_key"] == f"vigil-incident-{incident.id}"
    assert pd["payload"]["summary"] == f"[high] {CAUSE['headline']}"
    generic = next(r.payload for r in rows if r.format == "generic")
    assert generic["incident"]["size"] == 6 and generic["links"]["incident"].endswith(
        f"/incidents/{incident.id}"
    )
    # members are ranked: severity first, then the cause's order, then first raised
    assert [m["rule"] for m in generic["incident"]["members"]][:3] == [
        "prompt_cluster_mix",
        "token_psi",
        "latency_psi",
    ]
    assert generic["alert"]["runbook"]["next_steps"]  # the lead's runbook travels with it
    slack = next(r.payload for r in rows if r.format == "slack")
    assert (
        CAUSE["headline"] in slack["text"]
        and slack["metadata"]["event_payload"]["incident_id"] == incident.id
    )


def test_re_sent_only_when_severity_rises_or_it_resolves(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    event(sessions, settings, nine_rules(), T0)
    event(sessions, settings, nine_rules(), T0 + HOUR)  # the same event, next hour
    event(sessions, settings, nine_rules()[1:], T0 + 2 * HOUR)  # one member resolves, the rest stay
    assert len(deliveries(sessions)) == 1
    event(
        sessions,
        settings,
        [*nine_rules(), proposal(rule="eval_drop", kind="eval", severity="critical")],
        T0 + 3 * HOUR,
    )  # a new, more severe member joins the open incident: a rise
    (incident,) = incidents(sessions)
    assert incident.severity == "critical"
    assert [r.payload["event"] for r in deliveries(sessions)] == ["trigger", "trigger"]
    event(sessions, settings, [], T0 + 4 * HOUR)  # nothing fires: every member resolves
    rows = deliveries(sessions)
    assert [r.payload["event"] for r in rows] == ["trigger", "trigger", "resolve"]
    assert len({r.idempotency_key for r in rows}) == 3
    (incident,) = incidents(sessions)
    assert incident.status == "resolved" and incident.resolved_at == T0 + 4 * HOUR
    event(sessions, settings, nine_rules(), T0 + 5 * HOUR)  # a new event: a new incident
    assert [i.status for i in incidents(sessions)] == ["resolved", "open"]


def test_a_failing_canary_inhibits_model_and_eval_drift(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    with sessions() as s, s.begin():
        raise_condition(
            s, "canary_mismatch", "*", {"probes": 3}, healthy=False, now=T0, settings=settings
        )
    model_only = [
        proposal(rule="response_embedding_mmd", kind="model", severity="high"),
        proposal(rule="eval_drop", kind="eval", severity="critical"),
    ]
    event(sessions, settings, model_only, T0 + HOUR, cause=None)
    engine, drift = incidents(sessions)
    assert drift.inhibited_by == engine.id
    assert [r.incident_id for r in deliveries(sessions)] == [engine.id]  # the canary alone pages
    # a prompt member is not explained by the canary: the drift incident pages at its severity
    event(sessions, settings, [*model_only, proposal(rule="token_psi")], T0 + 2 * HOUR, cause=None)
    engine, drift = incidents(sessions)
    assert drift.inhibited_by is None and drift.severity == "moderate"
    assert [r.incident_id for r in deliveries(sessions)] == [engine.id, drift.id]


def test_a_condition_is_an_incident_of_its_own(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    event(sessions, settings, nine_rules(), T0)
    with sessions() as s, s.begin():
        raise_condition(s, "monitor_backlog", "embed", {}, healthy=False, now=T0, settings=settings)
        raise_condition(
            s, "monitor_backlog", "embed", {}, healthy=False, now=T0 + HOUR, settings=settings
        )
    assert len(incidents(sessions)) == 2 and len(deliveries(sessions)) == 2
    with sessions() as s, s.begin():
        raise_condition(
            s, "monitor_backlog", "embed", healthy=True, now=T0 + 2 * HOUR, settings=settings
        )
    assert [i.status for i in incidents(sessions)] == ["open", "resolved"]
    assert deliveries(sessions)[-1].payload["event"] == "resolve"


def test_actions_on_the_incident_reach_every_member(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    event(sessions, settings, nine_rules(), T0)
    (incident,) = incidents(sessions)
    with sessions() as s, s.begin():
        incident_lifecycle.acknowledge(s, incident.id, actor="alice", now=T0 + HOUR, note="on it")
        members = list(s.scalars(select(Alert).where(Alert.incident_id == incident.id)))
        assert {a.acknowledged_by for a in members} == {"alice"} and len(members) == 6
        with pytest.raises(LifecycleError, match="future"):
            incident_lifecycle.snooze(s, incident.id, actor="bob", until=T0, now=T0 + HOUR)
        incident_lifecycle.snooze(s, incident.id, actor="bob", until=T0 + 3 * HOUR, now=T0 + HOUR)
    # inside the snooze a rise stays quiet
    event(
        sessions,
        settings,
        [*nine_rules(), proposal(rule="eval_drop", kind="eval", severity="critical")],
        T0 + 2 * HOUR,
    )
    assert len(deliveries(sessions)) == 1
    with sessions() as s, s.begin():
        incident_lifecycle.resolve(
            s,
            incident.id,
            actor="carol",
            now=T0 + 2 * HOUR,
            settings=settings,
            note="rolled back v2",
        )
        assert {a.status for a in s.scalars(select(Alert))} == {"resolved"}
        lead = s.scalars(select(Alert).where(Alert.rule == "prompt_cluster_mix")).one()
        assert [a.action for a in actions(s, lead.id)] == ["acknowledge", "snooze", "resolve"]
    assert [r.payload["event"] for r in deliveries(sessions)] == ["trigger", "resolve"]
    with sessions() as s, pytest.raises(LifecycleError, match="resolved"):
        incident_lifecycle.acknowledge(s, incident.id, actor="x", now=T0 + 3 * HOUR)
