"""The registry is the one list of drift tests: a test registered anywhere runs in run_drift
(with or without an eval frame), and a new test is one module plus its tests: validation levels,
reasons and the baselines page's words read its spec, with no other file naming it."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest
from drift_synth import make_samples

from dashboards.charts import direction_of
from drift.baseline.build import build_baseline
from drift.baseline.power_report import DetectableEffect
from drift.baseline.power_words import describe as power_sentence
from drift.baseline.validate import describe, validation_levels
from drift.registry import TestSpec, all_tests, register, unregister
from drift.result import TestResult
from drift.run import run_drift

NEW_TEST = textwrap.dedent(
    '''
    """A median gap in reference standard deviations: the module a new test is."""

    import numpy as np

    from drift.registry import TestSpec, register
    from drift.result import TestResult, insufficient


    def median_gap(reference, current, *, threshold, rng, min_samples=20):
        ref = np.asarray(reference, dtype=float)
        cur = np.asarray(current, dtype=float)
        if ref.size < min_samples or cur.size < min_samples:
            return insufficient("median_gap", threshold, ref.size, cur.size, min_samples)
        sd = float(ref.std()) or 1.0
        gap = abs(float(np.median(cur)) - float(np.median(ref))) / sd
        return TestResult("median_gap", gap, None, threshold, False)


    SPEC = register(
        TestSpec(
            name="median_gap",
            kind="numeric",
            direction="statistic",
            default_threshold=0.3,
            min_samples=20,
            func=median_gap,
            display_name="the median gap",
            unit="reference standard deviations",
            validation_threshold=0.2,
        )
    )
    '''
)


@pytest.fixture(scope="module")
def baseline():
    return build_baseline(make_samples(800, seed=50), seed=0)


def _sign(reference, current, *, threshold, rng, min_samples=1):
    return TestResult("throwaway", 1.0, None, threshold, False)


def test_a_registered_test_runs_in_run_drift_with_an_eval_frame(baseline):
    register(TestSpec("throwaway", "numeric", "statistic", 0.5, 1, _sign))
    try:
        hour = make_samples(300, seed=54, t0=1.7e9 + 7200)
        week = make_samples(700, seed=55, t0=1.7e9 - 6 * 86400, span_s=7 * 86400)
        for eval_frame in (None, week):
            out = run_drift(baseline, hour, segment_by=["tenant"], eval_frame=eval_frame)
            mine = out.results_for(test="throwaway")
            assert mine and all(r.drifted for r in mine)  # the spec's verdict: 1.0 > 0.5
            assert {r.segment for r in mine} >= {"*"} and len({r.segment for r in mine}) > 1
        assert out.results_for(test="eval_trend", segment="*")  # read from the eval frame
    finally:
        unregister("throwaway")


def test_every_detector_is_registered_with_its_words():
    specs = {s.name: s for s in all_tests()}
    for name in ("new_category", "new_cluster", "cluster_growth", "eval_trend",
                 "new_prompt_template", "response_evidence"):  # fmt: skip
        assert name in specs
    assert all(s.display_name and s.unit for s in specs.values())


def test_a_new_test_is_one_module(tmp_path, monkeypatch, baseline):
    package = tmp_path / "extra_drift_tests"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "median_gap.py").write_text(NEW_TEST)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        importlib.import_module("extra_drift_tests.median_gap")
        out = run_drift(baseline, make_samples(300, seed=7, drift="prompt"), segment_by=[])
        gaps = out.results_for(test="median_gap")
        assert {r.feature for r in gaps} >= {"prompt_tokens", "completion_tokens"}
        moved = [r for r in gaps if r.drifted]
        assert moved and all(r.statistic > r.threshold for r in moved)

        assert validation_levels().thresholds["median_gap"] == {"*": 0.2}
        assert describe(moved[0]).startswith(f"median_gap on {moved[0].feature}: ")
        effect = DetectableEffect("median_gap", "prompt_tokens", "shift", 0.4, 2.0, 0.9)
        assert power_sentence(effect, 300).startswith("The median gap detects a shift in ")
        assert direction_of("median_gap") == "statistic"
    finally:
        unregister("median_gap")
        for name in ("extra_drift_tests.median_gap", "extra_drift_tests"):
            sys.modules.pop(name, None)
    assert "median_gap" not in validation_levels().thresholds


def test_reasons_read_p_values_as_before():
    """A detector with its own rule and a p-value (eval trend, cluster growth) is read by p, a
    statistic test by its statistic."""
    trend = TestResult("eval_trend", 0.1, 0.001, 0.05, True, feature="eval_score")
    psi = TestResult("psi", 0.4, 0.02, 0.1, True, feature="latency_ms")
    assert describe(trend) == "eval_trend on eval_score: p = 0.001 ≤ 0.05 (statistic 0.1)"
    assert describe(psi) == "psi on latency_ms: 0.4 > 0.1"
