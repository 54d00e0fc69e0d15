"""The one rules table (vigil.alert_table): consistent, shared by drift and alerts, and the drift
job's live path tiers raw results with it."""

from __future__ import annotations

import pytest

import alerts
import drift.alerting.custom_rules
from alerts.proposal import coerce_proposal
from drift.alerting.proposals import propose_alerts
from drift.result import TestResult
from vigil import alert_table
from vigil.alert_table import DEFAULT_RULES, KINDS, SEVERITIES, Rule, condition_rule


def test_names_are_unique_and_fit_the_alert_columns():
    names = [r.name for r in DEFAULT_RULES]
    assert len(names) == len(set(names))
    for rule in DEFAULT_RULES:
        # every row must pass the same validation a proposal built from it goes through
        p = coerce_proposal({"severity": rule.severity, "rule": rule.name, "kind": rule.kind})
        assert (p.rule, p.severity, p.kind) == (rule.name, rule.severity, rule.kind)


def test_drift_and_alerts_read_the_same_table():
    assert (
        tuple(r for r in DEFAULT_RULES if r.test is not None)
        == drift.alerting.custom_rules.DEFAULT_RULES
    )
    assert alerts.KINDS is KINDS and alerts.SEVERITIES is SEVERITIES
    assert set(alert_table.DRIFT_KINDS) == {
        r.kind for r in drift.alerting.custom_rules.DEFAULT_RULES
    }
    assert {
        r.name for r in drift.alerting.custom_rules.DEFAULT_RULES
    } == alert_table.DRIFT_RULE_NAMES


@pytest.mark.parametrize(
    "name, severity, kind",
    [
        ("monitor_window_failed", "high", "monitoring"),
        ("monitor_no_baseline", "review", "monitoring"),
        ("monitor_baseline_invalid", "high", "monitoring"),
        ("monitor_backlog", "moderate", "monitoring"),
        ("monitor_dead_letters", "moderate", "monitoring"),
        ("monitor_scheduler_stalled", "high", "monitoring"),
        ("monitor_leader_lost", "high", "monitoring"),
        ("canary_mismatch", "high", "engine"),
        ("canary_perplexity", "critical", "engine"),
        ("baseline_refresh", "review", "operational"),
    ],
)
def test_condition_rules_and_their_tiers(name, severity, kind):
    rule = condition_rule(name)
    assert (rule.severity, rule.kind, rule.test) == (severity, kind, None)
    # a condition never fires from drift results, whatever they hold
    assert not rule.matches(TestResult("psi", 9.9, 0.0, 0.1, True, feature=name))


def test_condition_rule_rejects_drift_rules_and_unknown_names():
    with pytest.raises(KeyError, match="'token_psi' is not a condition rule; known: "):
        condition_rule("token_psi")
    with pytest.raises(KeyError, match="monitor_window_failed"):
        condition_rule("monitor_window_faild")


def test_a_row_with_an_unknown_tier_or_kind_is_refused():
    with pytest.raises(ValueError, match="rule x: severity 'urgent'"):
        Rule("x", "psi", ("*",), "urgent", "prompt")
    with pytest.raises(ValueError, match="rule x: kind 'latency'"):
        Rule("x", "psi", ("*",), "high", "latency")


def test_drift_job_tiers_raw_results_with_the_table():
    """What the removed raw-result evaluator checked, on the live path
    (drift.alerting.proposals)."""
    results = [
        TestResult("psi", 0.31, None, 0.25, True, feature="prompt_tokens"),
        TestResult("psi", 0.28, None, 0.25, True, feature="prompt_chars"),
        TestResult(
            "mmd", 0.02, 0.001, 0.05, True, feature="response_embedding", segment="tenant=a"
        ),
        TestResult("mmd", 0.0, 0.6, 0.05, False, feature="prompt_embedding"),
        TestResult("eval_trend", None, None, 0.05, False, insufficient=True, feature="eval_judge"),
        TestResult("ks", 0.3, 0.0001, 0.05, True, feature="latency_ms"),
        TestResult("psi", 0.4, None, 0.25, True, feature="ttft_ms", segment="tenant=b"),
    ]
    proposals = {
        (p.rule, p.segment): p
        for p in propose_alerts(results, drift.alerting.custom_rules.DEFAULT_RULES)
    }
    # ks has no rule, insufficient data never alerts, undrifted results never alert
    assert set(proposals) == {
        ("token_psi", "*"),
        ("response_embedding_mmd", "tenant=a"),
        ("latency_psi", "tenant=b"),
    }
    psi = proposals[("token_psi", "*")]
    assert (psi.severity, psi.kind, len(psi.evidence["results"])) == ("moderate", "prompt", 2)
    mmd = proposals[("response_embedding_mmd", "tenant=a")]
    assert (mmd.severity, mmd.kind) == ("high", "model")
    latency = proposals[("latency_psi", "tenant=b")]
    assert (latency.severity, latency.kind) == ("moderate", "operational")
