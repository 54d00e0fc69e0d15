"""Dedupe and cooldown: what one firing of a rule does to the alerts table (pure logic).

- same rule + segment while an alert is open → update it (last_seen, occurrences, evidence),
  never a second alert;
- notify again only when the cooldown since the last notification has passed, or at once when
  the severity rises (an escalation should not wait an hour);
- the same drift run firing twice (a job re-run after a crash) is counted once and notified once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from alerts.proposal import SEVERITY_RANK


def dedupe_key(rule: str, segment: str) -> str:
    return f"{rule}|{segment}"


@dataclass(frozen=True)
class Plan:
    create: bool  # a new alert row (else update the open one)
    count: bool  # one more occurrence
    notify: bool  # enqueue deliveries now
    reason: str  # why: new | same run | escalated | cooldown elapsed | cooling down


def plan_firing(
    existing: Any | None, *, severity: str, run_id: int | None, now: datetime, cooldown_s: float
) -> Plan:
    if existing is None:
        return Plan(create=True, count=True, notify=True, reason="new")
    if run_id is not None and existing.run_id == run_id:
        return Plan(create=False, count=False, notify=False, reason="same run")
    if SEVERITY_RANK[severity] > SEVERITY_RANK.get(existing.severity, -1):
        return Plan(create=False, count=True, notify=True, reason="escalated")
    last = existing.last_notified
    if last is None or now - last >= timedelta(seconds=cooldown_s):
        return Plan(create=False, count=True, notify=True, reason="cooldown elapsed")
    return Plan(create=False, count=True, notify=False, reason="cooling down")
