"""Dedupe: what one firing of a rule does to the alerts table (pure logic).

- same rule + segment while an alert is open → update it (last_seen, occurrences, evidence),
  never a second alert;
- the same drift run firing twice (a job re-run after a crash) is counted once.

Whether anyone is told is the incident's business (`alerts.incidents`): a trigger when it
opens or its severity rises, a resolve when it ends — never a reminder at the same severity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def dedupe_key(rule: str, segment: str) -> str:
    return f"{rule}|{segment}"


@dataclass(frozen=True)
class Plan:
    create: bool  # a new alert row (else update the open one)
    count: bool  # one more occurrence
    reason: str  # why: new | same run | fired again


def plan_firing(existing: Any | None, *, run_id: int | None) -> Plan:
    if existing is None:
        return Plan(create=True, count=True, reason="new")
    if run_id is not None and existing.run_id == run_id:
        return Plan(create=False, count=False, reason="same run")
    return Plan(create=False, count=True, reason="fired again")
