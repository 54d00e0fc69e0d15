"""One notification per event: the trigger notifications one drift run raises for the same rule
(the same cause, e.g. prompt PSI) in several segments go to each target as one delivery that
lists the segments inside — Alertmanager's group_by, with (run, rule) as the group key.

Only the notification is grouped. Each segment keeps its own alert row, so dedupe, cooldown,
escalation, acknowledgement and resolution still work per member (a member that stops firing
is resolved on its own, with its own resolve notification). PagerDuty targets are not grouped:
one incident per alert is what lets each member's resolve close its own incident.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from sqlalchemy import inspect
from sqlalchemy.orm import Session

from alerts.payloads import SLACK_TEXT_MAX, alert_url
from alerts.proposal import SEVERITY_RANK
from storage.models import Alert, Delivery

GROUPED_FORMATS = ("generic", "slack")
MAX_LISTED = 50  # members listed in one body; the count is always exact


def group_key(alert: Alert) -> tuple[int, str] | None:
    return (alert.run_id, alert.rule) if alert.run_id is not None else None


def _member(alert: Alert, public_url: str) -> dict[str, Any]:
    return {"alert_id": alert.id, "segment": alert.segment, "severity": alert.severity,
            "summary": alert.summary, "url": alert_url(alert, public_url)}


def with_group(payload: dict[str, Any], fmt: str, group: dict[str, Any]) -> dict[str, Any]:
    """The leader's body, extended to speak for the whole group."""
    segments = ", ".join(m["segment"] for m in group["members"])
    if fmt == "generic":
        return {**payload, "group": group}
    lines = "\n".join(f"• <{m['url']}|{m['segment']}> ({m['severity']})" for m in group["members"])
    block = {"type": "section", "text": {"type": "mrkdwn",
                                         "text": f"*{group['size']} segments*\n{lines}"[:SLACK_TEXT_MAX]}}
    blocks = list(payload.get("blocks") or [])
    return {**payload, "text": f"[{group['size']} segments: {segments}"[:200] + "] " + payload.get("text", ""),
            "blocks": blocks[:2] + [block] + blocks[2:]}


def group_triggers(session: Session, deliveries: Iterable[Delivery], alerts: dict[int, Alert],
                   public_url: str) -> list[Delivery]:
    """Merge freshly enqueued trigger deliveries that share (run, rule, target, format); return
    the deliveries kept. The most severe member leads (its row carries the group's body); the
    others' rows are removed. The caller's transaction commits or drops all of it."""
    buckets: dict[tuple, list[Delivery]] = defaultdict(list)
    kept: list[Delivery] = []
    for delivery in deliveries:
        alert = alerts[delivery.alert_id]
        key = group_key(alert)
        if key is None or delivery.format not in GROUPED_FORMATS:
            kept.append(delivery)
        else:
            buckets[(*key, delivery.target, delivery.format)].append(delivery)
    for (run_id, rule, _target, fmt), members in buckets.items():
        members.sort(key=lambda d: (-SEVERITY_RANK[alerts[d.alert_id].severity], alerts[d.alert_id].segment))
        leader = members[0]
        kept.append(leader)
        if len(members) == 1:
            continue
        group = {"key": f"run-{run_id}:{rule}", "rule": rule, "run_id": run_id, "size": len(members),
                 "members": [_member(alerts[d.alert_id], public_url) for d in members[:MAX_LISTED]]}
        leader.payload = with_group(leader.payload, fmt, group)
        for other in members[1:]:
            if inspect(other).pending:  # enqueued in this flush cycle: never written
                session.expunge(other)
            else:
                session.delete(other)
    return kept
