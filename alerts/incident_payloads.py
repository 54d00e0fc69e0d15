"""Webhook bodies for one incident notification: the leading member's body (`alerts.payloads`)
made to speak for the incident — its headline, its members, its page, and one PagerDuty
`dedup_key` (`vigil-incident-<id>`) so a trigger, its escalations and its resolve are one
PagerDuty incident."""

from __future__ import annotations

import json
from typing import Any

from alerts.payloads import (
    ALERTMANAGER_SEVERITY,
    PAGERDUTY_SEVERITY,
    PAGERDUTY_SUMMARY_MAX,
    SLACK_TEXT_MAX,
    alert_url,
    build_payload,
    report_url,
)
from alerts.rules_file import RuleSet, Target

MAX_LISTED = 50  # members listed in one body; `size` is always exact
MAX_CAUSE_CHARS = 8_000


def incident_url(incident: Any, public_url: str) -> str:
    return f"{public_url.rstrip('/')}/incidents/{incident.id}"


def pagerduty_incident_key(incident: Any) -> str:
    """One PagerDuty incident per Vigil incident: escalations update it, the resolve closes it."""
    return f"vigil-incident-{incident.id}"


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def incident_document(incident: Any, members: list[Any], public_url: str) -> dict[str, Any]:
    cause = incident.cause or {}
    if len(json.dumps(cause, default=str)) > MAX_CAUSE_CHARS:
        cause = {k: cause[k] for k in ("headline", "order") if k in cause}
    return {
        "id": incident.id, "url": incident_url(incident, public_url), "status": incident.status,
        "headline": incident.headline, "severity": incident.severity, "kind": incident.kind,
        "labels": {"alertname": f"vigil_{incident.group_key.split('|')[0]}_incident",
                   "severity": ALERTMANAGER_SEVERITY[incident.severity]},
        "first_seen": _iso(incident.first_seen), "last_seen": _iso(incident.last_seen),
        "run_id": incident.run_id, "size": len(members), "cause": cause,
        "members": [{"alert_id": a.id, "rule": a.rule, "kind": a.kind, "segment": a.segment,
                     "severity": a.severity, "status": a.status, "summary": a.summary,
                     "url": alert_url(a, public_url)} for a in members[:MAX_LISTED]],
    }  # fmt: skip


def build_incident_payload(
    incident: Any,
    members: list[Any],
    target: Target,
    *,
    event: str,
    public_url: str,
    rules: RuleSet | None = None,
) -> dict[str, Any]:
    """`members` ranked, the lead first (`alerts.incidents.ranked`)."""
    lead = members[0]
    body = build_payload(lead, target, event=event, public_url=public_url, rules=rules)
    doc = incident_document(incident, members, public_url)
    i_url = doc["url"]
    if target.format == "pagerduty":
        body["dedup_key"] = pagerduty_incident_key(incident)
        if event == "trigger":
            body["payload"]["summary"] = f"[{incident.severity}] {incident.headline}"[
                :PAGERDUTY_SUMMARY_MAX
            ]
            body["payload"]["severity"] = PAGERDUTY_SEVERITY[incident.severity]
            body["payload"]["custom_details"].update(
                incident_url=i_url,
                incident_id=incident.id,
                headline=incident.headline,
                members=[f"{m['severity']} {m['rule']} [{m['segment']}]" for m in doc["members"]],
            )
            body["links"] = [{"href": i_url, "text": "Vigil incident"}, *body["links"]]
            body["client_url"] = i_url
        return body
    if target.format == "slack":
        state = "RESOLVED" if event == "resolve" else incident.severity.upper()
        lines = "\n".join(
            f"• <{m['url']}|{m['rule']}> [{m['segment']}] ({m['severity']})" for m in doc["members"]
        )
        header = {
            "type": "header",
            "text": {"type": "plain_text", "text": f"[{state}] Vigil incident #{incident.id}"},
        }
        lead_block = {
            "type": "section",
            "text": {"type": "mrkdwn", "text": _esc(incident.headline)[:SLACK_TEXT_MAX]},
        }
        listed = {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": f"*{len(members)} alerts*\n{lines}"[:SLACK_TEXT_MAX],
            },
        }
        blocks = list(body.get("blocks") or [])
        if event == "trigger":  # Slack calls /slack/actions back (sidecar/slack_actions.py)
            blocks.append({"type": "actions", "block_id": f"vigil-incident-{incident.id}",
                           "elements": [{"type": "button", "action_id": "vigil_acknowledge",
                                         "value": str(incident.id), "style": "primary",
                                         "text": {"type": "plain_text",
                                                  "text": "Acknowledge"}}]})  # fmt: skip
        text = f"[{state}] {_esc(incident.headline)} <{i_url}|Open incident>"
        return {**body, "text": text[:SLACK_TEXT_MAX],
                "blocks": [header, lead_block, listed, *blocks[2:]],
                # a Slack app posting through chat.postMessage threads on this
                # (one thread per incident)
                "metadata": {"event_type": "vigil_incident",
                             "event_payload": {"incident_id": incident.id,
                                               "event": event}}}  # fmt: skip
    return {
        **body,
        "incident": doc,
        "links": {**body["links"], "incident": i_url, "report": report_url(incident, public_url)},
    }


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
