"""Alert rules, webhook targets and per-severity routes, from a YAML or JSON file.

File format (every key optional; unknown keys are errors so a typo never passes silently):

    targets:                  # name -> webhook; VIGIL_WEBHOOK_TARGETS form the group "default"
      pager: {url: "https://events.pagerduty.com/v2/enqueue", format: pagerduty,
              routing_key_env: PD_ROUTING_KEY}      # or routing_key: "..."
      chat: {url: "https://hooks.slack.com/services/...", format: slack}
      tickets: {url: "https://tickets.example.com/hook", type: ticket}  # page | chat | ticket
    routes:                   # severity -> target names; a severity left out goes to "default",
                              # except `review` (set-up notices): to `type: ticket` targets only
      critical: [pager, chat, default]
      high: [chat, default]
    escalation:               # per route: unacknowledged incidents re-sent, then escalated
      critical: {repeat_interval_s: 3600, after_s: 1800, to: [manager]}
    rules:                    # first match wins; fields left out keep the proposal's values
      - name: psi_prompt_tokens
        match: {test: psi, feature: [prompt_tokens, "prompt_char*"]}   # globs, all must match
        severity: moderate
        kind: prompt
        routes: [chat]        # instead of the severity's route
        cooldown_s: 7200      # instead of VIGIL_ALERT_COOLDOWN_S
        runbook_url: "https://wiki.example.com/runbooks/prompt-size"   # carried in the payload
        next_steps: ["check the prompt template rollout", "..."]       # replace the built-in checks
      - match: {rule: "new_cluster*", segment: "tenant=internal"}
        enabled: false        # muted

`match` keys: `rule` (the proposed alert's rule name, see `vigil.alert_table`), `test`,
`feature` (a drift result's, or the proposal's evidence), `kind`, `segment`. A rule edits alerts
the table's rules propose; it never creates alerts of its own.

Anything wrong with the file, from unreadable bytes to a bad value deep inside, is a `RulesError`
naming the file and the entry at fault.
"""

from __future__ import annotations

import json
import os
import reprlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from alerts.escalation_rules import parse_escalation
from alerts.routing import (
    DEFAULT_GROUP,
    MATCH_KEYS,
    TARGET_TYPES,
    Decision,
    Match,
    Rule,
    RulesError,
    RuleSet,
    Target,
)
from vigil.alert_table import KINDS, SEVERITIES
from vigil.config import Settings

__all__ = [
    "Decision",
    "Match",
    "Rule",
    "RuleSet",
    "RulesError",
    "Target",
    "load_rules",
    "parse_rules",
]

FORMATS = ("generic", "slack", "pagerduty")
RULE_KEYS = {
    "name",
    "match",
    "severity",
    "kind",
    "routes",
    "cooldown_s",
    "enabled",
    "runbook_url",
    "next_steps",
}
MAX_STEPS, MAX_STEP_CHARS = 10, 500
TARGET_KEYS = {"url", "format", "routing_key", "routing_key_env", "type"}
TOP_KEYS = {"targets", "routes", "rules", "escalation"}
# values quoted in error messages: YAML aliases can nest one list a billion times over
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxstring = 3, 4, 4, 60


def load_rules(settings: Settings) -> RuleSet:
    """The rule set for `settings`: the file at VIGIL_ALERT_RULES_PATH, or the defaults."""
    path = settings.alert_rules_path
    if path is None:
        return parse_rules({}, settings, source="built-in defaults")
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RulesError(f"alert rules file {path}: cannot read it ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise RulesError(
            f"alert rules file {path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    try:
        data = _decode(text, json_only=path.suffix.lower() == ".json")
    except ValueError as exc:  # the decoders' errors carry the line and column
        raise RulesError(f"alert rules file {path}: {exc}") from None
    except RecursionError:  # both decoders recurse per nesting level
        raise RulesError(f"alert rules file {path}: nested too deeply") from None
    return parse_rules(data if data is not None else {}, settings, source=str(path))


def _decode(text: str, *, json_only: bool) -> Any:
    if json_only:
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ValueError(f"not valid JSON ({exc})") from None
    import yaml  # YAML is a superset of JSON: any other suffix is read as YAML

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"not valid YAML ({exc})") from None


def parse_rules(data: Any, settings: Settings, *, source: str = "<rules>") -> RuleSet:
    def fail(where: str, message: str) -> RulesError:
        return RulesError(f"alert rules {source}: {where}: {message}")

    if not isinstance(data, Mapping):
        raise fail("top level", f"expected a mapping, got {type(data).__name__}")
    _no_unknown(data, TOP_KEYS, "top level", fail)

    targets: dict[str, Target] = {}
    env_names = []
    for i, url in enumerate(settings.webhook_targets, start=1):
        name = f"{DEFAULT_GROUP}-{i}"
        targets[name] = Target(name, url, "generic")
        env_names.append(name)
    groups = {DEFAULT_GROUP: tuple(env_names)}
    raw_targets = data.get("targets") or {}
    if not isinstance(raw_targets, Mapping):
        raise fail("targets", "expected a mapping of name -> {url, format}")
    for name, spec in raw_targets.items():
        targets[str(name)] = _parse_target(str(name), spec, fail)
        if name in groups or str(name).startswith(f"{DEFAULT_GROUP}-"):
            raise fail(
                f"targets.{name}",
                f"the names {DEFAULT_GROUP!r} and '{DEFAULT_GROUP}-N' are reserved",
            )

    known = set(targets) | set(groups)
    raw_routes = data.get("routes") or {}
    if not isinstance(raw_routes, Mapping):
        raise fail("routes", "expected a mapping of severity -> list of target names")
    routes: dict[str, tuple[str, ...]] = {}
    for severity, names in raw_routes.items():
        if severity not in SEVERITIES:
            raise fail(
                f"routes.{severity}", f"unknown severity; use one of {', '.join(SEVERITIES)}"
            )
        routes[severity] = _names(names, known, f"routes.{severity}", fail)

    raw_rules = data.get("rules") or []
    if not isinstance(raw_rules, list):
        raise fail("rules", "expected a list of rules")
    rules = [_parse_rule(i, spec, known, fail) for i, spec in enumerate(raw_rules)]
    escalations = parse_escalation(data.get("escalation"), known, fail, _names)
    return RuleSet(tuple(rules), targets, routes, groups, escalations)


def _parse_target(name: str, spec: Any, fail) -> Target:
    where = f"targets.{name}"
    if not isinstance(spec, Mapping):
        raise fail(where, "expected a mapping with at least `url`")
    _no_unknown(spec, TARGET_KEYS, where, fail)
    url = spec.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise fail(f"{where}.url", f"{_show(url)} is not an http(s) URL")
    fmt = spec.get("format", "generic")
    if fmt not in FORMATS:
        raise fail(f"{where}.format", f"{_show(fmt)} is not one of {', '.join(FORMATS)}")
    key = spec.get("routing_key")
    if key is not None and not isinstance(key, str):
        raise fail(f"{where}.routing_key", f"expected a string, got {_show(key)}")
    env = spec.get("routing_key_env")
    if env is not None:
        if not isinstance(env, str):
            raise fail(f"{where}.routing_key_env", f"expected a variable name, got {_show(env)}")
        key = os.environ.get(env)
        if not key:
            raise fail(f"{where}.routing_key_env", f"environment variable {env[:80]} is not set")
    if fmt == "pagerduty" and not key:
        raise fail(where, "a pagerduty target needs `routing_key` or `routing_key_env`")
    kind = spec.get("type", "chat" if fmt == "slack" else "page")
    if kind not in TARGET_TYPES:
        raise fail(f"{where}.type", f"{_show(kind)} is not one of {', '.join(TARGET_TYPES)}")
    return Target(name, url, fmt, key, kind)


def _parse_rule(index: int, spec: Any, known: set[str], fail) -> Rule:
    where = f"rules[{index}]"
    if not isinstance(spec, Mapping):
        raise fail(where, "expected a mapping with `match`")
    _no_unknown(spec, RULE_KEYS, where, fail)
    name = spec.get("name") or f"rule_{index}"
    if not isinstance(name, str) or len(name) > 64:
        raise fail(
            f"{where}.name", f"expected a string of at most 64 characters, got {_show(name)}"
        )
    raw_match = spec.get("match")
    if not isinstance(raw_match, Mapping) or not raw_match:
        raise fail(f"{where}.match", f"expected a non-empty mapping of {', '.join(MATCH_KEYS)}")
    _no_unknown(raw_match, set(MATCH_KEYS), f"{where}.match", fail)
    patterns = {}
    for key, value in raw_match.items():
        values = [value] if isinstance(value, str) else value
        if (
            not isinstance(values, list)
            or not values
            or not all(isinstance(v, str) for v in values)
        ):
            raise fail(f"{where}.match.{key}", "expected a glob string or a list of them")
        patterns[key] = tuple(values)
    severity = spec.get("severity")
    if severity is not None and severity not in SEVERITIES:
        raise fail(f"{where}.severity", f"{_show(severity)} is not one of {', '.join(SEVERITIES)}")
    kind = spec.get("kind")
    if kind is not None and kind not in KINDS:
        raise fail(f"{where}.kind", f"{_show(kind)} is not one of {', '.join(KINDS)}")
    routes = spec.get("routes")
    if routes is not None:
        routes = _names(routes, known, f"{where}.routes", fail)
    cooldown = spec.get("cooldown_s")
    if cooldown is not None and (
        isinstance(cooldown, bool) or not isinstance(cooldown, int) or cooldown < 0
    ):
        raise fail(
            f"{where}.cooldown_s", f"expected a whole number of seconds >= 0, got {_show(cooldown)}"
        )
    enabled = spec.get("enabled", True)
    if not isinstance(enabled, bool):
        raise fail(f"{where}.enabled", f"expected true or false, got {_show(enabled)}")
    runbook_url = spec.get("runbook_url")
    if runbook_url is not None and (
        not isinstance(runbook_url, str)
        or len(runbook_url) > 2000
        or not runbook_url.startswith(("http://", "https://"))
    ):
        raise fail(f"{where}.runbook_url", f"{_show(runbook_url)} is not an http(s) URL")
    steps = spec.get("next_steps")
    if steps is not None:
        if (
            not isinstance(steps, list)
            or not 0 < len(steps) <= MAX_STEPS
            or not all(isinstance(x, str) and 0 < len(x) <= MAX_STEP_CHARS for x in steps)
        ):
            raise fail(
                f"{where}.next_steps",
                f"expected 1 to {MAX_STEPS} strings of at most {MAX_STEP_CHARS} characters",
            )
        steps = tuple(steps)
    return Rule(
        name, Match(**patterns), severity, kind, routes, cooldown, enabled, runbook_url, steps
    )


def _names(names: Any, known: set[str], where: str, fail) -> tuple[str, ...]:
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise fail(where, "expected a list of target names")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise fail(
            where, f"unknown target(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    return tuple(names)


def _no_unknown(spec: Mapping, allowed: set[str], where: str, fail) -> None:
    extra = sorted(str(k) for k in spec if k not in allowed)
    if extra:
        raise fail(
            where, f"unknown key(s) {', '.join(extra)}; allowed: {', '.join(sorted(allowed))}"
        )


def _show(value: Any) -> str:
    return _SHORT.repr(value)
