"""The smallest detectable effect (drift.baseline.power) against textbook power formulas, the
lattice shift, and its words and JSON form on any input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, stats
from test_registry_dispatch import welch  # noqa: F401 (fixture: registers the Welch t test)

from drift.baseline.build import Baseline, build_baseline
from drift.baseline.power import detectable_effects, lattice_step
from drift.baseline.power_report import DetectableEffect, PowerReport
from drift.baseline.power_words import describe, power_lines, summary_lines
from drift.features.feature_set import EmbeddingBlock, FeatureSet

ALPHA = 0.01
POWER = 0.8
WINDOW = 200
N_BASELINE = 4000  # the reference is half of it
REPEATS = 100


def _baseline(**columns: np.ndarray) -> Baseline:
    numeric = {k: v for k, v in columns.items() if v.dtype != object}
    categorical = {k: v for k, v in columns.items() if v.dtype == object}
    n = len(next(iter(columns.values())))
    return build_baseline(FeatureSet(n=n, numeric=numeric, categorical=categorical), seed=1)


def test_a_mean_shift_matches_the_two_sample_z_formula(welch):  # noqa: F811
    """A two-sided test at α on normal data detects, with power 1 - β, a mean shift of
    (z_{1-α/2} + z_{1-β}) · σ · sqrt(1/n + 1/m) (the textbook sample-size formula)."""
    base = _baseline(x=np.random.default_rng(0).normal(10.0, 2.0, N_BASELINE))
    report = detectable_effects(
        base, window_size=WINDOW, tests=("welch",), repeats=REPEATS, steps=8, power=POWER
    )
    (effect,) = report.effects
    m = N_BASELINE // 2
    expected = (stats.norm.ppf(1 - ALPHA / 2) + stats.norm.ppf(POWER)) * math.sqrt(
        1 / WINDOW + 1 / m
    )
    assert effect.kind == "shift" and effect.scale == pytest.approx(2.0, rel=0.05)
    assert effect.effect == pytest.approx(expected, rel=0.12)
    assert report.reference_size == m and report.power == POWER


def test_a_share_move_matches_the_two_proportion_formula():
    """Chi-square on two values is the two-proportion z-test squared: a share p moving to p - Δ
    is detected with power 1 - β where Φ((Δ - z·sqrt(p̄(1-p̄)(1/n+1/m))) / sd_Δ) = 1 - β."""
    p = 0.7
    labels = np.where(np.random.default_rng(2).random(N_BASELINE) < p, "stop", "length")
    base = _baseline(finish_reason=labels.astype(object))
    report = detectable_effects(
        base, window_size=WINDOW, tests=("chi2",), repeats=REPEATS, steps=8, power=POWER
    )
    (effect,) = report.effects
    m, n, z = N_BASELINE // 2, WINDOW, stats.norm.ppf(1 - ALPHA / 2)

    def shortfall(delta: float) -> float:
        q = p - delta
        pooled = (m * p + n * q) / (m + n)
        null_sd = math.sqrt(pooled * (1 - pooled) * (1 / n + 1 / m))
        alt_sd = math.sqrt(p * (1 - p) / m + q * (1 - q) / n)
        return stats.norm.cdf((delta - z * null_sd) / alt_sd) - POWER

    expected = optimize.brentq(shortfall, 1e-4, 0.6)
    assert (effect.source, effect.target) == ("stop", "length")
    assert effect.source_share == pytest.approx(p, abs=0.03)
    assert effect.effect == pytest.approx(expected, rel=0.12)


def test_counts_shift_by_whole_steps_not_off_the_lattice():
    """A fractional shift would move every count off the integers, which KS sees at once; on
    the lattice the detected shift of Poisson counts is that of a comparable continuous one."""
    assert lattice_step(np.array([3.0, 9.0, 6.0, 6.0])) == 3.0
    assert lattice_step(np.array([1.0, 1.5, 2.0])) == 0.5
    assert lattice_step(np.array([0.1, 0.33])) == pytest.approx(0.23)
    assert lattice_step(np.array([0.0, 1.0, math.pi])) is None
    counts = np.random.default_rng(3).poisson(6.0, N_BASELINE).astype(np.float64)
    report = detectable_effects(_baseline(n=counts), window_size=WINDOW, tests=("ks",))
    (effect,) = report.effects
    assert effect.effect is not None and 0.2 < effect.effect < 0.6


def test_a_baseline_keeps_its_power_through_json():
    base = _baseline(x=np.random.default_rng(4).normal(size=600))
    base.power = detectable_effects(base, window_size=100, tests=("ks", "psi")).to_dict()
    back = Baseline.from_dict(json.loads(json.dumps(base.to_dict())))
    assert back.power == base.power
    report = PowerReport.from_dict(back.power)
    assert [e.test for e in report.effects] == ["ks", "psi"]
    assert "in a window of 100 samples" in summary_lines(report)[0]


def test_what_a_window_too_small_for_the_test_says():
    base = _baseline(x=np.random.default_rng(5).normal(size=600))
    (effect,) = detectable_effects(base, window_size=10, tests=("psi",)).effects
    assert effect.effect is None and "minimum" in (effect.note or "")
    assert "not measured" in describe(effect, 10)


odd_text = st.text(max_size=40)
odd_number = st.none() | st.floats(allow_nan=True, allow_infinity=True)
effects = st.builds(
    DetectableEffect,
    test=st.sampled_from(["ks", "psi", "chi2", "mmd"]) | odd_text,
    feature=st.sampled_from(["completion_tokens", "finish_reason", "eval_x"]) | odd_text,
    kind=st.sampled_from(["shift", "share", "mix"]) | odd_text,
    effect=st.none() | st.floats(min_value=0, max_value=5),
    largest=st.floats(min_value=0, max_value=5),
    power_at_largest=st.floats(min_value=0, max_value=1),
    scale=odd_number,
    mean=odd_number,
    source=st.none() | odd_text,
    target=st.none() | odd_text,
    source_share=st.none() | st.floats(min_value=0, max_value=1),
    target_share=st.none() | st.floats(min_value=0, max_value=1),
    note=st.none() | odd_text,
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(effects, max_size=6),
    st.integers(1, 100_000),
    st.lists(odd_text, max_size=3),
)
def test_any_report_formats_and_survives_json(found, window, left_out):
    report = PowerReport(window, 10, effects=found, not_simulated=left_out)
    back = PowerReport.from_dict(json.loads(json.dumps(report.to_dict())))
    assert back.effects == found or any(
        isinstance(v, float) and math.isnan(v) for e in found for v in e.__dict__.values()
    )
    lines = power_lines(report)
    assert len(lines) == len(found) + (1 if left_out else 0)
    assert all(isinstance(line, str) and line for line in lines + summary_lines(report))
    assert all(line.encode("utf-8") for line in lines)


def test_the_prompt_mix_test_is_simulated_on_prompt_embeddings_only():
    rng = np.random.default_rng(6)
    centres = rng.normal(size=(6, 16)) * 3.0
    vectors = (centres[rng.integers(6, size=1200)] + rng.normal(size=(1200, 16))).astype(np.float32)
    fs = FeatureSet(n=1200)
    for name in ("prompt_embedding", "response_embedding"):
        fs.embeddings[name] = EmbeddingBlock(np.arange(1200), vectors)
    base = build_baseline(fs, seed=1, cluster=False)
    report = detectable_effects(base, window_size=200, tests=("cluster_mix", "conditional_mmd"))
    (effect,) = report.effects
    assert (effect.test, effect.feature, effect.kind) == ("cluster_mix", "prompt_embedding", "mix")
    assert effect.effect is not None and 0.01 < effect.effect < 0.5
    assert report.not_simulated == ["conditional_mmd"]
    assert "of the prompts moving to new content" in describe(effect, 200)
