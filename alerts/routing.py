"""Rule, target and routing dataclasses and `RuleSet`, which decides severity, kind, targets and
cooldown for one proposal. Read from a file by `alerts.rules_file`.

These are an operator's edits over proposals. The built-in tiers are not here: every proposal
already carries its rule's severity and kind from the one rules table (`vigil.alert_table`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from alerts.proposal import Proposal
from vigil.config import ConfigError

DEFAULT_GROUP = "default"
MATCH_KEYS = ("rule", "test", "feature", "kind", "segment")
# what a target is for: `page` wakes someone (PagerDuty, and any generic webhook unless the rules
# file says otherwise), `chat` is read by people on shift, `ticket` is worked through in hours
TARGET_TYPES = ("page", "chat", "ticket")
# severities whose default route (no `routes` entry, no rule's routes) reaches ticket targets
# only: a monitor-set-up notice ("no baseline yet") pages nobody on a fresh install
TICKET_ONLY_BY_DEFAULT = frozenset({"review"})


class RulesError(ConfigError):
    """The alert rules file is invalid; the message names the file and the entry at fault."""


@dataclass(frozen=True)
class Target:
    name: str
    url: str
    format: str = "generic"
    routing_key: str | None = None  # PagerDuty Events v2 integration key
    type: str = "page"  # one of TARGET_TYPES


@dataclass(frozen=True)
class Match:
    """Glob patterns per field; None matches anything, a tuple matches if any pattern does."""

    rule: tuple[str, ...] | None = None
    test: tuple[str, ...] | None = None
    feature: tuple[str, ...] | None = None
    kind: tuple[str, ...] | None = None
    segment: tuple[str, ...] | None = None

    def matches(self, values: Mapping[str, Any]) -> bool:
        for key in MATCH_KEYS:
            patterns = getattr(self, key)
            if patterns is None:
                continue
            value = values.get(key)
            if value is None or not any(fnmatchcase(str(value), p) for p in patterns):
                return False
        return True


@dataclass(frozen=True)
class Rule:
    name: str
    match: Match
    severity: str | None = None
    kind: str | None = None
    routes: tuple[str, ...] | None = None
    cooldown_s: int | None = None
    enabled: bool = True
    runbook_url: str | None = None  # the operator's runbook, sent instead of the built-in one
    next_steps: tuple[str, ...] | None = None  # replaces the built-in first checks


@dataclass(frozen=True)
class Decision:
    """What to do with one proposal: its final severity/kind, where it goes, its cooldown."""

    severity: str
    kind: str
    targets: tuple[Target, ...]
    cooldown_s: int
    rule: Rule | None


def match_values(
    *, rule: str, kind: str, segment: str, evidence: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """What a rule's `match` is checked against for one proposal or alert: one entry per drift
    result in its evidence (the drift job puts them under `results`), else the evidence's own
    test/feature. A rule matches when it matches any entry."""
    evidence = evidence or {}
    base = {"rule": rule, "kind": kind, "segment": segment}
    results = evidence.get("results")
    entries = [r for r in results if isinstance(r, Mapping)] if isinstance(results, list) else []
    if not entries:
        entries = [evidence]
    return [{**base, "test": e.get("test"), "feature": e.get("feature")} for e in entries]


@dataclass(frozen=True)
class Escalation:
    """Per route (severity): re-send an unacknowledged incident's trigger every
    `repeat_interval_s`, and after `after_s` unacknowledged also page `to`."""

    repeat_interval_s: int | None = None
    after_s: int | None = None
    to: tuple[str, ...] = ()


@dataclass
class RuleSet:
    rules: tuple[Rule, ...] = ()
    targets: dict[str, Target] = field(default_factory=dict)
    routes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)  # "default" -> env targets
    escalations: dict[str, Escalation] = field(default_factory=dict)  # severity -> escalation

    def rule_for(self, candidates: list[dict[str, Any]]) -> Rule | None:
        """The first configured rule matching any of `match_values(...)`."""
        return next((r for r in self.rules if any(r.match.matches(v) for v in candidates)), None)

    def targets_for(self, severity: str, rule: Rule | None = None) -> tuple[Target, ...]:
        names = rule.routes if rule is not None and rule.routes is not None else None
        if names is None:
            names = self.routes.get(severity)
        implicit = names is None
        out: dict[str, Target] = {}
        for name in names if names is not None else (DEFAULT_GROUP,):
            for member in self.groups.get(name, (name,)):
                out[member] = self.targets[member]
        if implicit and severity in TICKET_ONLY_BY_DEFAULT:
            return tuple(t for t in self.targets.values() if t.type == "ticket")
        return tuple(out.values())

    def named(self, names: tuple[str, ...]) -> tuple[Target, ...]:
        """Targets by name or group name."""
        out: dict[str, Target] = {}
        for name in names:
            for member in self.groups.get(name, (name,)):
                out[member] = self.targets[member]
        return tuple(out.values())

    def decide(self, proposal: Proposal, default_cooldown_s: int) -> Decision | None:
        """Apply the first matching rule; None when that rule mutes the proposal."""
        rule = self.rule_for(
            match_values(
                rule=proposal.rule,
                kind=proposal.kind,
                segment=proposal.segment,
                evidence=proposal.evidence,
            )
        )
        if rule is not None and not rule.enabled:
            return None
        severity = (rule.severity if rule else None) or proposal.severity
        kind = (rule.kind if rule else None) or proposal.kind
        cooldown = rule.cooldown_s if rule and rule.cooldown_s is not None else default_cooldown_s
        return Decision(severity, kind, self.targets_for(severity, rule), cooldown, rule)
