"""Default routing (SQLite and PostgreSQL): with no rules file a monitor-set-up notice (`review`,
such as "no baseline yet" on a fresh install) pages nobody; it reaches `type: ticket` targets
only, unless a route names its targets. Payloads carry Alertmanager's severity label."""

from __future__ import annotations

from alert_helpers import T0, make_settings, proposal
from sqlalchemy import select

from alerts.rules_file import RulesError, parse_rules
from alerts.service import raise_alerts, raise_condition
from storage.models import Delivery

PD = {"url": "http://127.0.0.1:9/pd", "format": "pagerduty", "routing_key": "k"}
TICKETS = {"url": "http://127.0.0.1:9/tickets", "type": "ticket"}


def no_baseline(sessions, settings, rules=None) -> list[Delivery]:
    with sessions() as s, s.begin():
        raise_condition(
            s, "monitor_no_baseline", "*", {}, healthy=False, now=T0, settings=settings, rules=rules
        )
    with sessions() as s:
        return list(s.scalars(select(Delivery)))


def test_a_fresh_install_does_not_page_for_no_baseline(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"])  # no rules file
    assert no_baseline(sessions, settings) == []


def test_set_up_notices_go_to_ticket_targets_unless_routed(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    rules = parse_rules({"targets": {"pd": PD, "tickets": TICKETS}}, settings)
    assert [d.target for d in no_baseline(sessions, settings, rules)] == [TICKETS["url"]]
    routed = parse_rules({"targets": {"pd": PD}, "routes": {"review": ["pd"]}}, settings)
    assert {t.name for t in routed.targets_for("review")} == {"pd"}  # an explicit route holds
    assert {t.name for t in rules.targets_for("high")} == {"default-1"}  # others: the default
    try:
        parse_rules({"targets": {"x": {**TICKETS, "type": "pager"}}}, settings)
    except RulesError as exc:
        assert "targets.x.type" in str(exc) and "page, chat, ticket" in str(exc)
    else:
        raise AssertionError("an unknown target type must be refused")


def test_payloads_carry_alertmanager_severity(sessions, alerts_db):
    settings = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    with sessions() as s, s.begin():
        raise_alerts(s, [proposal(rule="prompt_cluster_mix", severity="high")], run_id=None,
                     now=T0, settings=settings)  # fmt: skip
    with sessions() as s:
        (row,) = s.scalars(select(Delivery))
    assert row.payload["alert"]["labels"]["severity"] == "critical"
    assert row.payload["incident"]["labels"] == {
        "alertname": "vigil_drift_incident",
        "severity": "critical",
    }
