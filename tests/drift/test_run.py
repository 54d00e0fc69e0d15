"""The drift job: whole + per-segment results, minimum sizes, rules as data, the report shape."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from drift_synth import make_samples

from drift.alerting.custom_rules import DEFAULT_RULES, merge_rules, rules_from_dicts
from drift.baseline.build import build_baseline
from drift.baseline.validate import validate_baseline
from drift.run import run_drift


@pytest.fixture(scope="module")
def baseline():
    b = build_baseline(make_samples(800, seed=50), seed=0)
    assert validate_baseline(b).valid
    return b


def test_drift_in_one_tenant_is_reported_on_that_segment(baseline):
    cur = make_samples(400, seed=51, t0=1.7e9 + 7200)
    acme = cur["tenant"] == "acme"
    cur.loc[acme, "ttft_ms"] *= 2.0  # only acme got slow
    report = run_drift(baseline, cur, segment_by=["tenant"], rng_seed=1)
    assert set(report.segments) == {"*", "tenant=acme", "tenant=globex"}
    slow = {(a.segment, a.rule) for a in report.alerts}
    assert ("tenant=acme", "latency_psi") in slow
    assert not any(seg == "tenant=globex" for seg, _ in slow)
    psi = report.results_for(test="psi", feature="ttft_ms", segment="tenant=acme")[0]
    assert psi.drifted and psi.statistic > psi.threshold


def test_small_segments_are_insufficient_never_alerts(baseline):
    cur = make_samples(300, seed=52, t0=1.7e9 + 7200, drift="prompt")
    cur["tenant"] = ["tiny"] * 10 + ["acme"] * 290  # "tiny" has 10 rows and no baseline rows
    report = run_drift(baseline, cur, segment_by=["tenant"], rng_seed=1)
    tiny = report.results_for(segment="tenant=tiny")
    assert len(tiny) == 1 and tiny[0].test == "segment_size" and tiny[0].insufficient
    assert not tiny[0].drifted and not any(a.segment == "tenant=tiny" for a in report.alerts)
    assert any(a.segment == "tenant=acme" for a in report.alerts)


def test_rules_are_data_overrides_disable_and_add(baseline):
    cur = make_samples(300, seed=53, t0=1.7e9 + 7200, drift="operational")
    assert {a.rule for a in run_drift(baseline, cur, segment_by=[]).alerts} == {"latency_psi"}
    custom = rules_from_dicts(
        [
            {
                "name": "latency_psi",
                "test": "psi",
                "severity": "high",
                "kind": "operational",
                "features": ["latency_ms", "ttft_ms", "tpot_ms"],
                "enabled": False,
            },
            {
                "name": "ttft_ks",
                "test": "ks",
                "features": ["ttft_ms"],
                "severity": "critical",
                "kind": "operational",
            },
        ]
    )
    rules = merge_rules(DEFAULT_RULES, custom)
    alerts = run_drift(baseline, cur, segment_by=[], rules=rules).alerts
    assert {a.rule for a in alerts} == {"ttft_ks"} and alerts[0].severity == "critical"


@pytest.mark.parametrize(
    "item,needle",
    [
        ({"name": "x", "test": "psi", "severity": "urgent", "kind": "prompt"}, "severity 'urgent'"),
        ({"name": "x", "test": "psi", "severity": "high", "kind": "vibes"}, "kind 'vibes'"),
        ({"name": "x", "severity": "high", "kind": "prompt"}, "'test' must be"),
        (
            {"name": "x", "test": "psi", "severity": "high", "kind": "prompt", "features": "a"},
            "'features'",
        ),
    ],
)
def test_bad_rules_are_named(item, needle):
    with pytest.raises(ValueError, match=needle):
        rules_from_dicts([item])


def test_eval_frame_supplies_the_trailing_week(baseline):
    hour = make_samples(300, seed=54, t0=1.7e9 + 7200)  # this hour: scores look fine
    week = make_samples(700, seed=55, t0=1.7e9 - 6 * 86400, span_s=7 * 86400)
    week["eval_score"] *= 0.9  # ... but the week's scores fell 10 %
    report = run_drift(baseline, hour, segment_by=[], eval_frame=week)
    trend = report.results_for(test="eval_trend", segment="*")
    assert (
        len(trend) == 1 and trend[0].drifted and trend[0].statistic == pytest.approx(0.1, abs=0.02)
    )
    assert len(trend[0].detail["daily_means"]) == 7
    assert [a.kind for a in report.alerts] == ["eval"] and report.alerts[0].severity == "critical"
    quiet = run_drift(baseline, hour, segment_by=[])
    assert not quiet.results_for(test="eval_trend")[0].drifted


def test_report_is_json_and_proposals_fit_the_alerts_contract(baseline):
    from alerts.proposal import coerce_proposal  # the consumer's own validation

    cur = make_samples(300, seed=56, t0=1.7e9 + 7200, drift="persona")
    report = run_drift(baseline, cur, segment_by=["tenant"])
    full = json.loads(json.dumps(report.to_dict(full=True)))
    assert full["drifted"] and full["segments"]["*"]["n_current"] == 300
    persona = [a for a in report.alerts if a.kind == "persona" and a.segment == "*"]
    assert persona, report.alerts
    reps = persona[0].evidence["results"][0]["detail"]["clusters"][0]["representatives"]
    assert all(i < int(0.15 * 300) for i in reps)  # the drifted rows are the first 15 %
    for i, alert in enumerate(report.alerts):
        assert coerce_proposal(alert, i).kind == alert.kind


def test_unvalidated_baseline_is_flagged():
    b = build_baseline(make_samples(300, seed=57), seed=0)
    report = run_drift(b, make_samples(200, seed=58), segment_by=[])
    assert not report.baseline_valid and "not been validated" in report.baseline_reasons[-1]


def test_frame_without_optional_columns():
    """Only prompt_tokens and latency: the job runs what it can and nothing else."""
    rng = np.random.default_rng(59)
    ref = pd.DataFrame({"prompt_tokens": rng.poisson(40, 400), "latency_ms": rng.gamma(5, 20, 400)})
    cur = pd.DataFrame({"prompt_tokens": rng.poisson(40, 200), "latency_ms": rng.gamma(5, 20, 200)})
    b = build_baseline(ref, seed=0)
    validate_baseline(b)
    report = run_drift(b, cur)
    assert {r.test for r in report.results} == {"psi", "ks", "wasserstein"}
    assert not report.alerts and set(report.segments) == {"*"}
