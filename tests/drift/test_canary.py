"""drift.detectors.canary against brute-force oracles (position loops, scipy's geometric mean), and
the verdict and calibration rules on hand-built cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import gmean

from drift.detectors.canary import (
    CRITICAL_PERPLEXITY_RATIO,
    FLOOR_LOGPROB_DELTA_MAX,
    FLOOR_LOGPROB_DELTA_MEAN,
    FLOOR_PERPLEXITY_RATIO,
    Observation,
    Tolerance,
    calibrate_tolerance,
    compare,
    judge,
    perplexity,
    token_hash,
)

logprob = st.floats(min_value=-30.0, max_value=0.0, allow_nan=False)


@st.composite
def observation_pairs(draw):
    n = draw(st.integers(0, 24))
    expected_ids = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    observed_ids = draw(st.lists(st.integers(0, 5), min_size=0, max_size=24))
    e_lp = draw(st.lists(logprob, min_size=len(expected_ids), max_size=len(expected_ids)))
    o_lp = draw(st.lists(logprob, min_size=len(observed_ids), max_size=len(observed_ids)))
    return Observation.of(expected_ids, e_lp), Observation.of(observed_ids, o_lp)


def brute_force(
    expected: Observation, observed: Observation
) -> tuple[float, int | None, list[float]]:
    a, b = expected.token_ids, observed.token_ids
    longest = max(len(a), len(b))
    equal = 0
    for i in range(min(len(a), len(b))):
        equal += a[i] == b[i]
    diverge = None
    for i in range(longest):
        if i >= len(a) or i >= len(b) or a[i] != b[i]:
            diverge = i
            break
    stop = longest if diverge is None else diverge
    deltas = [abs(expected.logprobs[i] - observed.logprobs[i]) for i in range(stop)]
    return (equal / longest if longest else 1.0), diverge, deltas


@settings(max_examples=300, deadline=None, derandomize=True)
@given(observation_pairs())
def test_compare_matches_position_by_position_oracle(pair):
    expected, observed = pair
    rate, diverge, deltas = brute_force(expected, observed)
    c = compare(expected, observed)
    assert c.token_match_rate == pytest.approx(rate)
    assert c.first_divergence == diverge
    assert c.logprob_delta_max == pytest.approx(max(deltas, default=0.0))
    assert c.logprob_delta_mean == pytest.approx(float(np.mean(deltas)) if deltas else 0.0)
    assert c.perplexity_ratio is None


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(logprob, min_size=1, max_size=64))
def test_perplexity_is_inverse_geometric_mean_of_probabilities(lps):
    assert perplexity(lps) == pytest.approx(1.0 / gmean(np.exp(lps)), rel=1e-9)


def test_perplexity_ratio_and_critical_verdict():
    e = Observation.of([1, 2], [-1.0, -1.0], perplexity=10.0)
    worse = Observation.of(
        [1, 2], [-1.0, -1.0], perplexity=10.0 * (CRITICAL_PERPLEXITY_RATIO + 0.01)
    )
    c = compare(e, worse)
    assert c.perplexity_ratio == pytest.approx(CRITICAL_PERPLEXITY_RATIO + 0.01)
    v = judge(c, Tolerance())
    assert not v.ok and v.critical and "perplexity" in v.reasons[0]
    slightly = Observation.of([1, 2], [-1.0, -1.0], perplexity=10.0 * 1.01)
    v = judge(compare(e, slightly), Tolerance())
    assert not v.ok and not v.critical  # a mismatch, below the critical margin
    better = Observation.of([1, 2], [-1.0, -1.0], perplexity=5.0)
    assert not judge(compare(e, better), Tolerance()).critical  # only a degradation is critical


def test_judge_passes_within_tolerance_and_names_each_breach():
    e = Observation.of([1, 2, 3, 4], [-0.5, -0.6, -0.7, -0.8])
    within = Observation.of([1, 2, 3, 4], [-0.5 + 5e-4, -0.6, -0.7, -0.8])
    assert judge(compare(e, within), Tolerance()).ok
    diverged = Observation.of([1, 2, 9, 9], [-0.5, -0.6 - 0.05, -3.0, -3.0])
    v = judge(compare(e, diverged), Tolerance())
    assert not v.ok and len(v.reasons) == 3  # tokens, max delta, mean delta
    assert "first divergence at token 2" in v.reasons[0]


def test_calibration_scales_observed_noise_and_keeps_floors():
    e = Observation.of([1, 2, 3], [-1.0, -2.0, -3.0], perplexity=4.0)
    exact = [e, e]
    t = calibrate_tolerance(e, exact)
    assert t == Tolerance(
        1.0, FLOOR_LOGPROB_DELTA_MAX, FLOOR_LOGPROB_DELTA_MEAN, FLOOR_PERPLEXITY_RATIO
    )
    noisy = Observation.of([1, 2, 3], [-1.0, -2.0 + 0.01, -3.0], perplexity=4.0 * 1.002)
    t = calibrate_tolerance(e, [e, noisy], factor=4.0)
    assert t.logprob_delta_max == pytest.approx(0.04)
    assert t.logprob_delta_mean == pytest.approx(4.0 * 0.01 / 3)
    assert t.perplexity_ratio == pytest.approx(0.008)
    flipped = Observation.of([1, 7, 7], [-1.0, -2.5, -1.0])  # batch-variant greedy tokens
    t = calibrate_tolerance(e, [e, flipped])
    assert t.min_token_match_rate == pytest.approx(1 / 3)
    assert judge(compare(e, flipped), t).ok


def test_token_hash_distinguishes_sequences_and_observation_checks_lengths():
    assert token_hash([1, 2, 3]) == token_hash((1, 2, 3))
    assert token_hash([1, 2, 3]) != token_hash([1, 2, 4]) != token_hash([1, 2])
    with pytest.raises(ValueError):
        Observation.of([1, 2], [-1.0])
    with pytest.raises(ValueError):
        perplexity([])
    assert math.isclose(
        Tolerance.from_dict(Tolerance().to_dict()).logprob_delta_max, FLOOR_LOGPROB_DELTA_MAX
    )
