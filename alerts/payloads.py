"""Webhook bodies for one alert notification: generic JSON, Slack-compatible, PagerDuty Events v2.

Every body carries the alert's drill-down page `{public_url}/alerts/{id}` and its drift report
`{public_url}/reports/{run_id}` (the report list `{public_url}/reports` when the alert came from
no drift run, e.g. the baseline refresh reminder).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from alerts.rules_file import RuleSet, Target
from alerts.runbooks import runbook

SCHEMA = "vigil.alert.v1"
EVENTS = ("trigger", "resolve")
# PagerDuty Events v2 knows critical|error|warning|info
PAGERDUTY_SEVERITY = {
    "critical": "critical",
    "high": "error",
    "moderate": "warning",
    "review": "info",
}
# Alertmanager's conventional `severity` label: critical pages, warning is looked at in hours,
# info is a notice; Vigil's high pages too
ALERTMANAGER_SEVERITY = {
    "critical": "critical",
    "high": "critical",
    "moderate": "warning",
    "review": "info",
}
PAGERDUTY_SUMMARY_MAX = 1024  # Events v2 truncates longer summaries
SLACK_TEXT_MAX = 3000  # a section block's text limit
SLACK_HEADER_MAX = 150
MAX_EVIDENCE_CHARS = 16_000  # keep bodies far below receivers' limits (PagerDuty: 512 KB)


def alert_url(alert: Any, public_url: str) -> str:
    return f"{public_url.rstrip('/')}/alerts/{alert.id}"


def report_url(alert: Any, public_url: str) -> str:
    base = public_url.rstrip("/")
    return f"{base}/reports/{alert.run_id}" if alert.run_id is not None else f"{base}/reports"


def encode_body(payload: dict[str, Any]) -> bytes:
    """The exact bytes sent and signed (compact, key-sorted, UTF-8)."""
    return json.dumps(payload, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


def build_payload(
    alert: Any, target: Target, *, event: str, public_url: str, rules: RuleSet | None = None
) -> dict[str, Any]:
    """One alert's body; `rules`: the rule set whose `runbook_url`/`next_steps` apply."""
    if event not in EVENTS:
        raise ValueError(f"event {event!r} is not one of {', '.join(EVENTS)}")
    builders = {"generic": generic_payload, "slack": slack_payload, "pagerduty": pagerduty_payload}
    try:
        builder = builders[target.format]
    except KeyError:
        raise ValueError(f"target {target.name}: unknown format {target.format!r}") from None
    return builder(alert, target, event=event, public_url=public_url, rules=rules)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _evidence(alert: Any) -> Any:
    evidence = alert.evidence or {}
    size = len(json.dumps(evidence, default=str))
    if size <= MAX_EVIDENCE_CHARS:
        return evidence
    return {"truncated": True, "size_chars": size, "keys": sorted(map(str, evidence))[:50]}


def alert_document(alert: Any, public_url: str, rules: RuleSet | None = None) -> dict[str, Any]:
    """The alert as plain JSON (also what the sidecar's API can return)."""
    return {
        "id": alert.id,
        "rule": alert.rule,
        "kind": alert.kind,
        "severity": alert.severity,
        "labels": {
            "alertname": alert.rule,
            "severity": ALERTMANAGER_SEVERITY[alert.severity],
            "kind": alert.kind,
            "segment": alert.segment,
        },  # fmt: skip
        "segment": alert.segment,
        "status": alert.status,
        "summary": alert.summary,
        "evidence": _evidence(alert),
        "run_id": alert.run_id,
        "first_seen": _iso(alert.first_seen),
        "last_seen": _iso(alert.last_seen),
        "occurrences": alert.occurrences,
        "url": alert_url(alert, public_url),
        "report_url": report_url(alert, public_url),
        "runbook": runbook(alert, public_url, rules),
    }


def generic_payload(
    alert: Any, target: Target, *, event: str, public_url: str, rules: RuleSet | None = None
) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "event": event,
        "alert": alert_document(alert, public_url, rules),
        "links": {"alert": alert_url(alert, public_url), "report": report_url(alert, public_url)},
    }


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def slack_payload(
    alert: Any, target: Target, *, event: str, public_url: str, rules: RuleSet | None = None
) -> dict[str, Any]:
    state = "RESOLVED" if event == "resolve" else alert.severity.upper()
    title = f"[{state}] Vigil {alert.kind} drift: {alert.rule} ({alert.segment})"
    a_url, r_url = alert_url(alert, public_url), report_url(alert, public_url)
    fields = [
        ("Severity", alert.severity),
        ("Kind", alert.kind),
        ("Segment", alert.segment),
        ("Rule", alert.rule),
        ("Occurrences", str(alert.occurrences)),
        ("First seen", _iso(alert.first_seen) or "-"),
    ]
    room = SLACK_TEXT_MAX - len(title) - len(a_url) - 32
    book = runbook(alert, public_url, rules)
    steps = "\n".join(f"{i}. {_slack_escape(step)}" for i, step in enumerate(book["next_steps"], 1))
    if book["url"]:
        steps += f"\n<{book['url']}|Runbook>"
    return {
        # `text` is the notification/fallback line; `blocks` are what Slack renders
        # (the summary is clipped, never the link)
        "text": f"{_slack_escape(title)}: {_clip(_slack_escape(alert.summary), room)} "
        f"<{a_url}|Open alert>",
        "blocks": [
            {
                "type": "header",
                "text": {"type": "plain_text", "text": _clip(title, SLACK_HEADER_MAX)},
            },
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": _clip(_slack_escape(alert.summary), SLACK_TEXT_MAX),
                },
            },
            {
                "type": "section",
                "fields": [
                    {"type": "mrkdwn", "text": f"*{name}*\n{_slack_escape(value)}"}
                    for name, value in fields
                ],
            },
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": _clip(f"*What to check*\n{steps}", SLACK_TEXT_MAX),
                },
            },
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Open alert"},
                        "url": a_url,
                    },
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Drift report"},
                        "url": r_url,
                    },
                ],
            },
        ],
    }


def pagerduty_payload(
    alert: Any, target: Target, *, event: str, public_url: str, rules: RuleSet | None = None
) -> dict[str, Any]:
    if not target.routing_key:
        raise ValueError(f"target {target.name}: PagerDuty needs a routing_key")
    # the incident's key replaces it (alerts.incident_payloads): one PagerDuty incident per event
    base = {"routing_key": target.routing_key, "dedup_key": f"vigil-alert-{alert.id}"}
    if event == "resolve":
        return {**base, "event_action": "resolve"}
    a_url, r_url = alert_url(alert, public_url), report_url(alert, public_url)
    book = runbook(alert, public_url, rules)
    return {
        **base,
        "event_action": "trigger",
        "payload": {
            "summary": _clip(f"[{alert.severity}] {alert.summary}", PAGERDUTY_SUMMARY_MAX),
            "severity": PAGERDUTY_SEVERITY[alert.severity],
            "source": urlsplit(public_url).netloc or "vigil",
            "timestamp": _iso(alert.last_seen),
            "component": alert.rule,
            "group": alert.segment,
            "class": alert.kind,
            "custom_details": {
                "vigil_severity": alert.severity,
                "occurrences": alert.occurrences,
                "first_seen": _iso(alert.first_seen),
                "run_id": alert.run_id,
                "evidence": _evidence(alert),
                "alert_url": a_url,
                "report_url": r_url,
                "runbook": book,
            },
        },
        "links": [{"href": a_url, "text": "Vigil alert"}, {"href": r_url, "text": "Drift report"}]
        + ([{"href": book["url"], "text": "Runbook"}] if book["url"] else []),
        "client": "Vigil",
        "client_url": a_url,
    }
