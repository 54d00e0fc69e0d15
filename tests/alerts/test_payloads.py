"""Payload formats: generic JSON, Slack blocks, PagerDuty Events v2 — fields, limits, links."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from alerts.payloads import build_payload, encode_body
from alerts.rules_file import Target

PUBLIC = "https://vigil.example.com:8443/"
PD = Target("pager", "https://events.pagerduty.com/v2/enqueue", "pagerduty", "R" * 32)


def make_alert(**overrides):
    values = dict(
        id=42,
        rule="prompt_embedding_mmd",
        kind="prompt",
        severity="high",
        segment="tenant=acme",
        status="open",
        summary="MMD on prompt embeddings is significant (p = 0.001)",
        evidence={"test": "mmd", "feature": "prompt_embedding", "p_value": 0.001},
        run_id=9,
        first_seen=datetime(2026, 11, 29, 10, tzinfo=UTC),
        last_seen=datetime(2026, 11, 29, 12, tzinfo=UTC),
        occurrences=3,
    )
    values.update(overrides)
    return SimpleNamespace(**values)


def check_pagerduty_trigger(body: dict) -> None:
    """The Events v2 contract (developer.pagerduty.com, "Send an Alert Event")."""
    assert set(body) >= {"routing_key", "event_action", "payload"}
    assert body["event_action"] == "trigger"
    assert isinstance(body["routing_key"], str) and body["routing_key"]
    assert 0 < len(body["dedup_key"]) <= 255
    p = body["payload"]
    assert isinstance(p["summary"], str) and 0 < len(p["summary"]) <= 1024
    assert isinstance(p["source"], str) and p["source"]
    assert p["severity"] in {"critical", "error", "warning", "info"}
    datetime.fromisoformat(p["timestamp"])
    assert isinstance(p["custom_details"], dict)
    for link in body["links"]:
        assert set(link) == {"href", "text"} and link["href"].startswith("https://")


@pytest.mark.parametrize(
    "severity, pd_severity",
    [("critical", "critical"), ("high", "error"), ("moderate", "warning"), ("review", "info")],
)
def test_pagerduty_trigger_has_events_v2_required_fields(severity, pd_severity):
    body = build_payload(make_alert(severity=severity), PD, event="trigger", public_url=PUBLIC)
    check_pagerduty_trigger(body)
    assert body["routing_key"] == "R" * 32
    assert body["dedup_key"] == "vigil-alert-42"  # one incident per Vigil alert
    assert body["payload"]["severity"] == pd_severity
    assert body["payload"]["source"] == "vigil.example.com:8443"
    assert body["payload"]["group"] == "tenant=acme"
    hrefs = [link["href"] for link in body["links"]]
    assert hrefs == [
        "https://vigil.example.com:8443/alerts/42",
        "https://vigil.example.com:8443/reports/9",
    ]
    assert body["payload"]["custom_details"]["evidence"]["p_value"] == 0.001


def test_pagerduty_resolve_closes_the_same_incident():
    body = build_payload(make_alert(status="resolved"), PD, event="resolve", public_url=PUBLIC)
    assert body == {
        "routing_key": "R" * 32,
        "event_action": "resolve",
        "dedup_key": "vigil-alert-42",
    }


def test_pagerduty_summary_is_clipped_to_1024_chars():
    body = build_payload(make_alert(summary="x" * 5000), PD, event="trigger", public_url=PUBLIC)
    check_pagerduty_trigger(body)
    assert len(body["payload"]["summary"]) == 1024


def test_generic_payload_carries_alert_and_links():
    body = build_payload(
        make_alert(), Target("t", "http://h/x"), event="trigger", public_url=PUBLIC
    )
    assert body["schema"] == "vigil.alert.v1" and body["event"] == "trigger"
    assert body["alert"]["url"] == "https://vigil.example.com:8443/alerts/42"
    assert body["alert"]["report_url"] == "https://vigil.example.com:8443/reports/9"
    assert body["links"] == {"alert": body["alert"]["url"], "report": body["alert"]["report_url"]}
    assert body["alert"]["first_seen"] == "2026-11-29T10:00:00+00:00"
    assert body["alert"]["occurrences"] == 3
    # encode_body is what gets signed: deterministic, compact, valid JSON
    encoded = encode_body(body)
    assert json.loads(encoded) == body and encode_body(json.loads(encoded)) == encoded


def test_alert_without_a_run_links_the_report_list():
    body = build_payload(
        make_alert(run_id=None), Target("t", "http://h/x"), event="trigger", public_url=PUBLIC
    )
    assert body["links"]["report"] == "https://vigil.example.com:8443/reports"


def test_huge_evidence_is_summarised_not_sent_whole():
    evidence = {f"feature_{i}": list(range(200)) for i in range(50)}
    body = build_payload(
        make_alert(evidence=evidence), Target("t", "http://h/x"), event="trigger", public_url=PUBLIC
    )
    assert body["alert"]["evidence"]["truncated"] is True
    assert len(encode_body(body)) < 20_000


def test_slack_payload_blocks_escape_and_link():
    alert = make_alert(summary="latency <p95> & friends " + "y" * 4000)
    body = build_payload(
        alert,
        Target("chat", "https://hooks.slack.com/x", "slack"),
        event="trigger",
        public_url=PUBLIC,
    )
    assert body["text"].startswith("[HIGH] ") and len(body["text"]) <= 3000
    assert body["text"].endswith("<https://vigil.example.com:8443/alerts/42|Open alert>")
    types = [block["type"] for block in body["blocks"]]
    assert types == ["header", "section", "section", "section", "actions"]
    header = body["blocks"][0]["text"]
    assert header["type"] == "plain_text" and len(header["text"]) <= 150
    section = body["blocks"][1]["text"]["text"]
    assert section.startswith("latency &lt;p95&gt; &amp; friends") and len(section) <= 3000
    assert body["blocks"][3]["text"]["text"].startswith("*What to check*\n1. ")  # the runbook
    buttons = body["blocks"][4]["elements"]
    assert [b["url"] for b in buttons] == [
        "https://vigil.example.com:8443/alerts/42",
        "https://vigil.example.com:8443/reports/9",
    ]
    resolved = build_payload(
        alert, Target("chat", "https://h", "slack"), event="resolve", public_url=PUBLIC
    )
    assert resolved["text"].startswith("[RESOLVED]")


def test_unknown_event_or_format_is_an_error():
    with pytest.raises(ValueError, match="event 'ack'"):
        build_payload(make_alert(), PD, event="ack", public_url=PUBLIC)
    with pytest.raises(ValueError, match="unknown format 'teams'"):
        build_payload(
            make_alert(), Target("x", "http://h", "teams"), event="trigger", public_url=PUBLIC
        )
