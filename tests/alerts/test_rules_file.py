"""Rules, targets and routes from YAML/JSON files: matching, routing, validation messages."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from alerts.proposal import ProposalError, coerce_proposal
from alerts.rules_file import RulesError, load_rules, parse_rules
from vigil.config import load_settings

RULES_YAML = """
targets:
  pager: {url: "https://events.pagerduty.com/v2/enqueue", format: pagerduty, routing_key: abc}
  chat: {url: "https://hooks.slack.com/services/T/B/x", format: slack}
routes:
  critical: [pager, chat, default]
  high: [chat]
rules:
  - name: quiet_internal
    match: {rule: "new_cluster*", segment: "tenant=internal"}
    enabled: false
  - name: tokens_are_high_here
    match: {test: psi, feature: ["prompt_tokens", "prompt_char*"]}
    severity: high
    cooldown_s: 60
  - name: evals_to_pager_only
    match: {kind: eval}
    routes: [pager]
"""


@pytest.fixture
def settings(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text(RULES_YAML)
    return load_settings(
        webhook_targets=["http://127.0.0.1:9/a", "http://127.0.0.1:9/b"], alert_rules_path=path
    )


def prop(**kw):
    base = dict(
        severity="moderate",
        rule="token_psi",
        kind="prompt",
        segment="*",
        summary="s",
        evidence={},
    )
    base.update(kw)
    return coerce_proposal(base)


def test_yaml_rules_route_by_severity_and_override(settings):
    rules = load_rules(settings)
    assert sorted(rules.targets) == ["chat", "default-1", "default-2", "pager"]
    # a configured rule rewrites severity and cooldown; high routes to chat only
    d = rules.decide(prop(evidence={"test": "psi", "feature": "prompt_chars"}), 3600)
    assert (d.severity, d.kind, d.cooldown_s) == ("high", "prompt", 60)
    assert [t.name for t in d.targets] == ["chat"]
    # no rule matches: the proposal's own tier; moderate has no route -> the env targets
    d = rules.decide(prop(evidence={"test": "ks", "feature": "latency_ms"}), 3600)
    assert (d.severity, d.cooldown_s, d.rule) == ("moderate", 3600, None)
    assert [t.url for t in d.targets] == ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b"]
    # critical fans out to pager, chat and the env group
    d = rules.decide(prop(severity="critical", kind="model"), 3600)
    assert [t.name for t in d.targets] == ["pager", "chat", "default-1", "default-2"]
    # a rule's own routes beat the severity's route
    d = rules.decide(prop(severity="critical", kind="eval", rule="eval_drop"), 3600)
    assert [t.name for t in d.targets] == ["pager"] and d.targets[0].routing_key == "abc"
    # muted rule on one segment only
    assert (
        rules.decide(prop(rule="new_cluster", kind="persona", segment="tenant=internal"), 0) is None
    )
    assert (
        rules.decide(prop(rule="new_cluster", kind="persona", segment="tenant=acme"), 0) is not None
    )


def test_json_file_and_no_file(tmp_path):
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"routes": {"review": []}}))
    rules = load_rules(
        load_settings(webhook_targets=["http://127.0.0.1:9/a"], alert_rules_path=path)
    )
    assert rules.rules == () and rules.targets_for("review") == ()
    assert [t.name for t in rules.targets_for("high")] == ["default-1"]
    # without a file nothing rewrites a proposal: the table's tier it carries holds
    builtin = load_rules(load_settings(alert_rules_path=None))
    assert builtin.rules == ()
    d = builtin.decide(
        prop(severity="high", evidence={"test": "psi", "feature": "prompt_tokens"}), 10
    )
    assert d.severity == "high" and d.rule is None and d.targets == ()


@pytest.mark.parametrize(
    "data, message",
    [
        (
            {"rule": []},
            r"top level: unknown key\(s\) rule; allowed: escalation, routes, rules, targets",
        ),
        ({"defaults": True}, r"top level: unknown key\(s\) defaults"),
        (
            {"rules": [{"match": {"test": "psi"}, "severty": "high"}]},
            r"rules\[0\]: unknown key\(s\) severty",
        ),
        (
            {"rules": [{"match": {"test": "psi"}, "severity": "urgent"}]},
            r"rules\[0\].severity: 'urgent' is not one of",
        ),
        ({"rules": [{"match": {"test": "psi"}, "kind": "vibes"}]}, r"rules\[0\].kind: 'vibes'"),
        ({"rules": [{"match": {}}]}, r"rules\[0\].match: expected a non-empty mapping"),
        ({"rules": [{"match": {"metric": "x"}}]}, r"rules\[0\].match: unknown key\(s\) metric"),
        ({"rules": [{"match": {"test": 3}}]}, r"rules\[0\].match.test: expected a glob"),
        (
            {"rules": [{"match": {"test": "x"}, "routes": ["nowhere"]}]},
            r"unknown target\(s\) nowhere",
        ),
        (
            {"rules": [{"match": {"test": "x"}, "cooldown_s": -5}]},
            r"cooldown_s: expected a whole number",
        ),
        ({"routes": {"urgent": ["default"]}}, r"routes.urgent: unknown severity"),
        ({"targets": {"p": {"url": "https://x", "format": "pagerduty"}}}, "needs `routing_key`"),
        (
            {"targets": {"p": {"url": "ftp://x"}}},
            r"targets.p.url: 'ftp://x' is not an http\(s\) URL",
        ),
        (
            {"targets": {"p": {"url": "https://x", "format": "teams"}}},
            "'teams' is not one of generic",
        ),
        (
            {"targets": {"p": {"url": "https://x", "routing_key_env": "VIGIL_TEST_UNSET_KEY"}}},
            "VIGIL_TEST_UNSET_KEY is not set",
        ),
        ([1, 2], "top level: expected a mapping"),
    ],
)
def test_invalid_rules_name_what_is_wrong(data, message):
    with pytest.raises(RulesError, match=message):
        parse_rules(data, load_settings(), source="rules.yaml")


def test_unreadable_or_malformed_files(tmp_path):
    with pytest.raises(RulesError, match="cannot read it"):
        load_rules(load_settings(alert_rules_path=tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - match: {test: psi\n")
    with pytest.raises(RulesError, match=r"(?s)bad.yaml: not valid YAML .*line 2, column 12"):
        load_rules(load_settings(alert_rules_path=bad))
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{'rules': []}")
    with pytest.raises(RulesError, match="bad.json: not valid JSON"):
        load_rules(load_settings(alert_rules_path=bad_json))


def test_routing_key_from_environment(monkeypatch):
    monkeypatch.setenv("VIGIL_TEST_PD_KEY", "from-env")
    rules = parse_rules(
        {
            "targets": {
                "p": {
                    "url": "https://x",
                    "format": "pagerduty",
                    "routing_key_env": "VIGIL_TEST_PD_KEY",
                }
            }
        },
        load_settings(),
    )
    assert rules.targets["p"].routing_key == "from-env"


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("severity", "urgent", "severity 'urgent' is not one of review, moderate, high, critical"),
        ("kind", "latency", "kind 'latency' is not one of"),
        ("rule", "", "rule must be a non-empty string"),
        ("evidence", [1, 2], "evidence must be a mapping"),
    ],
)
def test_malformed_proposals_are_named(field, value, message):
    base = dict(severity="high", rule="r", kind="model", segment="*", summary="s", evidence={})
    base[field] = value
    with pytest.raises(ProposalError, match=f"proposed alert #3: {message}"):
        coerce_proposal(base, 3)


def test_proposal_objects_and_numpy_evidence_are_accepted():
    np = pytest.importorskip("numpy")
    obj = SimpleNamespace(
        severity="high",
        rule="r",
        kind="model",
        segment=None,
        summary="s",
        evidence={"stat": np.float64(0.5), "hist": np.arange(3), "bad": float("nan")},
    )
    p = coerce_proposal(obj)
    assert p.segment == "*" and p.evidence == {"stat": 0.5, "hist": [0, 1, 2], "bad": None}
    json.dumps(p.evidence)
