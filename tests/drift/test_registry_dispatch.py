"""The registry is the dispatch: a test registered in one module runs in the battery and in
calibration without either naming it, and every built-in test decides by its spec's verdict."""

from __future__ import annotations

import numpy as np
import pytest
from drift_synth import make_samples
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import drift.registry as registry
from drift.baseline.build import build_baseline
from drift.baseline.calibrate import calibrate_baseline
from drift.battery import BatteryOptions, run_battery
from drift.registry import TestSpec, all_tests, decide, get_test, register
from drift.result import TestResult, insufficient


def welch_test(reference, current, *, threshold, rng, min_samples=20, effect_floor=None):
    ref = np.asarray(reference, dtype=np.float64)
    cur = np.asarray(current, dtype=np.float64)
    ref, cur = ref[np.isfinite(ref)], cur[np.isfinite(cur)]
    if ref.size < min_samples or cur.size < min_samples:
        return insufficient("welch", threshold, ref.size, cur.size, min_samples)
    res = stats.ttest_ind(ref, cur, equal_var=False)
    stat, p = abs(float(res.statistic)), float(res.pvalue)
    return TestResult(
        test="welch",
        statistic=stat,
        p_value=p,
        threshold=threshold,
        drifted=decide("p_value", stat, p, threshold, effect_floor),
        detail={"p_raw": p, "effect_floor": effect_floor},
    )


@pytest.fixture
def welch():
    spec = register(
        TestSpec(
            name="welch",
            kind="numeric",
            direction="p_value",
            default_threshold=0.01,
            min_samples=20,
            func=welch_test,
        )
    )
    yield spec
    registry._REGISTRY.pop("welch")


def test_a_registered_test_runs_in_the_battery_and_in_calibration(welch):
    base = build_baseline(make_samples(800, seed=4, span_s=86400), seed=0)
    cur = build_baseline(make_samples(300, seed=5, drift="prompt"), seed=0).features
    results = run_battery(
        base.features,
        cur,
        frozen=base.frozen,
        levels=base.levels,
        rng=np.random.default_rng(0),
        options=BatteryOptions(mmd_permutations=99),
    )
    mine = [r for r in results if r.test == "welch"]
    assert {r.feature for r in mine} == set(base.features.numeric)
    assert any(r.drifted for r in mine if r.feature == "prompt_tokens")
    summary = calibrate_baseline(base, window_size=150, costly_chunks=0)
    assert any(key.startswith("welch:") for key in summary["tests"])


def test_unregistered_tests_are_gone_after_the_fixture():
    assert "welch" not in {s.name for s in all_tests()}


@pytest.mark.parametrize("name", [s.name for s in all_tests() if not s.own_rule])
def test_every_builtin_decides_by_its_spec_verdict(name):
    spec = get_test(name)
    rng = np.random.default_rng(1)
    if spec.kind == "embedding":
        ref, cur = rng.normal(size=(200, 4)), rng.normal(0.3, 1.0, size=(200, 4))
    elif spec.kind == "categorical":
        ref = rng.choice(list("abc"), 300).astype(object)
        cur = rng.choice(list("abcd"), 300, p=[0.4, 0.2, 0.2, 0.2]).astype(object)
    else:
        ref, cur = rng.normal(size=300), rng.normal(0.4, 1.0, size=300)
    extra = (
        {"ref_strata": np.zeros(len(ref), int), "cur_strata": np.zeros(len(cur), int)}
        if name == "conditional_mmd"
        else {}
    )
    res = spec.run(ref, cur, rng=rng, **extra)
    assert not res.insufficient
    assert res.drifted == spec.verdict(
        res.statistic, res.p_value, res.threshold, res.detail.get("effect_floor")
    )


@given(
    st.sampled_from(["statistic", "p_value"]),
    st.none() | st.floats(allow_nan=False),
    st.none() | st.floats(0, 1),
    st.floats(0, 1),
    st.none() | st.floats(allow_nan=False),
)
def test_decide_is_the_documented_rule(direction, statistic, p, threshold, floor):
    got = decide(direction, statistic, p, threshold, floor)
    if direction == "statistic":
        assert got == (statistic is not None and statistic > threshold)
    else:
        big = floor is None or (statistic is not None and statistic > floor)
        assert got == (p is not None and p <= threshold and big)
