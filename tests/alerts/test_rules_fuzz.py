"""The alert rules file is outside input: whatever it holds, loading it gives a rule set or a
RulesError naming the file, never another exception (property tests, seeded)."""

from __future__ import annotations

import json
import math

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alerts.proposal import coerce_proposal
from alerts.rules_file import RulesError, RuleSet, load_rules, parse_rules
from vigil.alert_table import DEFAULT_RULES, KINDS, SEVERITIES
from vigil.config import load_settings

FUZZ = settings(max_examples=150, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
SETTINGS = load_settings(webhook_targets=["http://127.0.0.1:9/a"], alert_rules_path=None)
PROPOSALS = [
    coerce_proposal({"severity": r.severity, "rule": r.name, "kind": r.kind, "segment": "*",
                     "evidence": {"results": [{"test": r.test, "feature": "prompt_tokens"}]}})
    for r in DEFAULT_RULES
]  # fmt: skip

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
plausible = st.sampled_from(
    [*SEVERITIES, *KINDS, "default", "default-1", "pager", "chat", "psi", "prompt_tokens", "*",
     "https://x.test/hook", "http://127.0.0.1:9/b", "ftp://x", "generic", "slack", "pagerduty",
     "token_psi", "tenant=*", "", "VIGIL_FUZZ_UNSET_VARIABLE"]
)  # fmt: skip
scalar = st.none() | st.booleans() | st.integers(-3, 10**9) | st.floats() | plausible | text
value = st.recursive(
    scalar,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(plausible | text, kids, max_size=3),
    max_leaves=8,
)
names = st.lists(plausible, max_size=3) | plausible | value
match = st.dictionaries(
    st.sampled_from(["rule", "test", "feature", "kind", "segment", "metric"]),
    plausible | st.lists(plausible, max_size=2) | value,
    max_size=3,
)
rule = st.fixed_dictionaries({}, optional={
    "name": plausible | value, "match": match | value, "severity": plausible | value,
    "kind": plausible | value, "routes": names, "cooldown_s": st.integers(-2, 10**6) | value,
    "enabled": st.booleans() | value, "severty": value,
})  # fmt: skip
target = st.fixed_dictionaries({}, optional={
    "url": plausible | value, "format": plausible | value, "routing_key": plausible | value,
    "routing_key_env": plausible | value, "uri": value,
})  # fmt: skip
document = st.fixed_dictionaries({}, optional={
    "targets": st.dictionaries(plausible | text, target | value, max_size=3) | value,
    "routes": st.dictionaries(plausible | text, names, max_size=3) | value,
    "rules": st.lists(rule | value, max_size=4) | value,
    "defaults": value,
})  # fmt: skip


def _exercise(rules: RuleSet) -> None:
    """A rule set that loaded must also work: routing and deciding never raise."""
    for severity in SEVERITIES:
        rules.targets_for(severity)
        for r in rules.rules:
            rules.targets_for(severity, r)
    for proposal in PROPOSALS:
        decision = rules.decide(proposal, 60)
        assert decision is None or decision.severity in SEVERITIES and decision.kind in KINDS


def _outcome(load) -> RuleSet | RulesError:
    try:
        rules = load()
    except RulesError as exc:
        return exc
    assert isinstance(rules, RuleSet)
    _exercise(rules)
    return rules


@FUZZ
@given(data=document | value)
def test_any_document_loads_or_is_named(data):
    outcome = _outcome(lambda: parse_rules(data, SETTINGS, source="fuzz.yaml"))
    if isinstance(outcome, RulesError):
        assert str(outcome).startswith("alert rules fuzz.yaml: ")
        assert len(str(outcome)) < 2000  # a message, not a dump of the input


@FUZZ
@given(data=document, as_json=st.booleans())
def test_any_document_from_a_file_loads_or_is_named(tmp_path_factory, data, as_json):
    path = tmp_path_factory.mktemp("rules") / ("rules.json" if as_json else "rules.yaml")
    dumped = json.dumps(data) if as_json else yaml.safe_dump(data, allow_unicode=True)
    path.write_text(dumped, encoding="utf-8")
    outcome = _outcome(lambda: load_rules(load_settings(alert_rules_path=path)))
    if isinstance(outcome, RulesError):
        assert str(path) in str(outcome)
    else:  # the file means what the document means
        assert outcome == parse_rules(data, load_settings(alert_rules_path=None))


@FUZZ
@given(
    raw=st.binary(max_size=200) | text.map(str.encode), suffix=st.sampled_from([".yaml", ".json"])
)
def test_any_bytes_load_or_are_named(tmp_path_factory, raw, suffix):
    path = tmp_path_factory.mktemp("rules") / f"rules{suffix}"
    path.write_bytes(raw)
    outcome = _outcome(lambda: load_rules(load_settings(alert_rules_path=path)))
    if isinstance(outcome, RulesError):
        assert str(outcome).startswith(f"alert rules file {path}: ") or str(path) in str(outcome)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_deep_nesting_is_an_error_not_a_crash(tmp_path, suffix):
    path = tmp_path / f"rules{suffix}"
    path.write_text('{"rules": ' + "[" * 50_000 + "]" * 50_000 + "}")
    with pytest.raises(RulesError, match="nested too deeply"):
        load_rules(load_settings(alert_rules_path=path))


def test_bytes_that_are_not_utf8_are_named(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_bytes(b"rules: []\n# caf\xe9\n")
    with pytest.raises(RulesError, match=r"rules.yaml: not UTF-8 text .*byte 15"):
        load_rules(load_settings(alert_rules_path=path))


def test_alias_bombs_give_a_short_message(tmp_path):
    """Aliases share one object, so loading is cheap; printing it in a message must be too."""
    lines = ["k0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"k{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    path = tmp_path / "rules.yaml"  # targets are checked first, whatever the order in the file
    path.write_text("routes:\n" + "\n".join("  " + line for line in lines)
                    + "\ntargets:\n  p: {url: *a9}\n")  # fmt: skip
    with pytest.raises(RulesError) as info:
        load_rules(load_settings(alert_rules_path=path))
    assert len(str(info.value)) < 2000


def test_nan_and_infinite_cooldowns_are_refused():
    for bad in (math.nan, math.inf, 1.5):
        with pytest.raises(RulesError, match="cooldown_s: expected a whole number"):
            parse_rules({"rules": [{"match": {"rule": "x"}, "cooldown_s": bad}]}, SETTINGS)


@pytest.mark.parametrize(
    "target_or_rule, message",
    [
        (
            {"targets": {"p": {"url": "https://x", "routing_key": [1]}}},
            r"routing_key: expected a string",
        ),
        (
            {"targets": {"p": {"url": "https://x", "routing_key_env": 7}}},
            "expected a variable name",
        ),
        (
            {"rules": [{"name": ["a"], "match": {"rule": "x"}}]},
            r"rules\[0\].name: expected a string",
        ),
    ],
)
def test_values_of_the_wrong_type_are_named(target_or_rule, message):
    with pytest.raises(RulesError, match=message):
        parse_rules(target_or_rule, SETTINGS)
