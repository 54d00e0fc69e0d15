"""The stratified traffic sampler: quotas per segment and hour, exact weights, unbiased totals."""

from __future__ import annotations

import random

import numpy as np
import pytest

from serving.traffic.sampler import TrafficSampler

HOUR = 3600.0
T0 = 1_700_000_000.0 - (1_700_000_000.0 % HOUR)  # the start of an hour


def _run(sampler: TrafficSampler, arrivals: list[tuple[str, float]]):
    kept: dict[str, list[float]] = {}
    for segment, ts in arrivals:
        d = sampler.decide(segment, ts)
        if d.keep:
            kept.setdefault(segment, []).append(d.weight)
    return kept


def test_small_segment_kept_whole_and_big_segment_gets_at_least_its_quota():
    sampler = TrafficSampler(rate=0.1, min_per_hour=5, seed=1)
    rng = random.Random(2)
    arrivals = [("big", T0 + rng.uniform(0, HOUR)) for _ in range(1000)]
    arrivals += [("small", T0 + rng.uniform(0, HOUR)) for _ in range(3)]
    arrivals.sort(key=lambda a: a[1])
    kept = _run(sampler, arrivals)
    assert kept["small"] == [1.0, 1.0, 1.0]  # minority over-sampled: every request, weight 1
    assert len(kept["big"]) >= 5
    assert kept["big"][:5] == [1.0] * 5  # the quota rows are certain inclusions
    assert kept["big"][5:] == pytest.approx([10.0] * (len(kept["big"]) - 5))  # then 1/0.1
    # roughly 5 + 0.1 * 995 rows for the big segment (binomial: sd ~ 9.5)
    assert 5 + 99.5 - 40 < len(kept["big"]) < 5 + 99.5 + 40


def test_quota_resets_every_hour():
    sampler = TrafficSampler(rate=0.0, min_per_hour=2, seed=0)
    arrivals = [("a", T0 + i) for i in range(5)] + [("a", T0 + HOUR + i) for i in range(5)]
    decisions = [sampler.decide(s, t).keep for s, t in arrivals]
    assert decisions == [True, True, False, False, False] * 2


def test_weighted_count_is_unbiased_for_every_segment():
    """Horvitz-Thompson: the sum of weights over kept rows estimates the true request count."""
    true_counts = {"a": 2000, "b": 300, "c": 12}
    estimates = {k: [] for k in true_counts}
    for trial in range(200):
        sampler = TrafficSampler(rate=0.05, min_per_hour=20, seed=trial)
        rng = random.Random(10_000 + trial)
        arrivals = [
            (s, T0 + rng.uniform(0, HOUR)) for s, n in true_counts.items() for _ in range(n)
        ]
        arrivals.sort(key=lambda a: a[1])
        kept = _run(sampler, arrivals)
        for segment in true_counts:
            estimates[segment].append(sum(kept.get(segment, [])))
    for segment, n in true_counts.items():
        est = np.asarray(estimates[segment])
        # the estimator's mean over 200 seeded trials is within 3 standard errors of the truth
        stderr = est.std(ddof=1) / np.sqrt(len(est)) if est.std() > 0 else 1e-9
        assert abs(est.mean() - n) <= 3 * stderr + 1e-6, (segment, est.mean(), n)
    assert estimates["c"] == [12.0] * 200  # below the quota: exact every time


def test_rate_one_keeps_everything_and_rate_zero_without_quota_keeps_nothing():
    all_in = TrafficSampler(rate=1.0, min_per_hour=0)
    none_in = TrafficSampler(rate=0.0, min_per_hour=0)
    for i in range(50):
        d = all_in.decide("x", T0 + i)
        assert d.keep and d.weight == 1.0
        assert not none_in.decide("x", T0 + i).keep


def test_segment_table_is_bounded():
    sampler = TrafficSampler(rate=0.0, min_per_hour=1, max_segments=3)
    kept = [sampler.decide(f"s{i}", T0).keep for i in range(10)]
    assert kept == [True] * 3 + [False] * 7  # past the bound, new segments get the base rate only


@pytest.mark.parametrize("rate,minimum", [(-0.1, 1), (1.5, 1), (0.1, -1)])
def test_bad_parameters_are_refused(rate, minimum):
    with pytest.raises(ValueError, match="must be"):
        TrafficSampler(rate=rate, min_per_hour=minimum)
