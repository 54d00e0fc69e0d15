"""The aggregated response test: kernels against brute force, the exact permutation p-value,
the null rate, conditioning on prompt clusters, power, and odd inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.spatial.distance import cdist

from drift.baseline.cluster_model import fit_clusters
from drift.battery_inputs import BatteryOptions, Frozen, Levels, TestInputs
from drift.detectors.prompt_response import aggregate_results
from drift.features.feature_set import extract_features
from drift.registry import get_test
from drift.result import TestResult
from drift.stattests.response_agg import (
    combine,
    fourier_features,
    kernel_features,
    kernel_statistics,
    response_agg_test,
    stratified_labels,
)
from tests.drift.test_conditional_mmd import frame


def test_fourier_features_approximate_the_gaussian_kernel():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 4))
    phi = fourier_features(x, 1.7, 20_000, np.random.default_rng(1))
    exact = np.exp(-cdist(x, x, "sqeuclidean") / (2 * 1.7**2))
    assert np.abs(phi @ phi.T - exact).max() < 0.05


def test_each_kernel_matches_brute_force_for_every_labelling():
    """MMD² of each kernel = |mean feature of one side - of the other|², row by row."""
    rng = np.random.default_rng(0)
    pooled = rng.normal(size=(14, 5))
    is_ref = np.r_[np.ones(8), np.zeros(6)].astype(np.float32)
    z = stratified_labels(np.zeros(14, int), is_ref, 5, rng)
    blocks = (("a", 0, 3), ("b", 3, 5))
    feats = kernel_features(pooled, blocks, 8, np.random.default_rng(1), scales=(0.5, 2.0))
    assert set(feats) == {"a:rbf0.5", "a:rbf2", "a:linear", "b:rbf0.5", "b:rbf2", "b:linear"}
    assert np.array_equal(feats["b:linear"], pooled[:, 3:5])
    got = kernel_statistics(feats, z)
    for key, phi in feats.items():
        for col in range(z.shape[1]):
            ref, cur = z[:, col] == 1, z[:, col] == 0
            gram = phi @ phi.T  # the kernel the features stand for
            want = (
                gram[ref][:, ref].mean() + gram[cur][:, cur].mean() - 2 * gram[ref][:, cur].mean()
            )
            assert got[key][col] == pytest.approx(want, rel=1e-4, abs=1e-6)


def test_p_value_is_the_rank_of_the_largest_standardised_statistic():
    """Recomputed from scratch: each kernel's values over the same labellings, z-scored,
    the max per labelling, then the count of labellings at or above the observed one."""
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(40, 3)), rng.normal(0.3, 1.0, size=(30, 3))
    res = response_agg_test(x, y, threshold=0.01, rng=np.random.default_rng(5), n_permutations=199)
    # the same draws, in the same order, outside the test
    r = np.random.default_rng(5)
    pooled = np.vstack([x, y])
    is_ref = np.r_[np.ones(40), np.zeros(30)].astype(np.float32)
    z = stratified_labels(np.zeros(70, int).astype(str), is_ref, 199, r)
    table = kernel_statistics(kernel_features(pooled, (("all", 0, 3),), 40, r), z)
    zscores = np.vstack([(v - v.mean()) / v.std() for v in table.values()])
    best = zscores.max(0)
    assert res.statistic == pytest.approx(best[0])
    assert res.p_value == pytest.approx((1 + np.sum(best[1:] >= best[0])) / 200)
    assert combine(table)[0] == pytest.approx(best)


@settings(max_examples=25, deadline=None)
@given(
    strata=st.lists(st.integers(0, 3), min_size=6, max_size=40),
    data=st.data(),
)
def test_relabellings_keep_each_stratum_s_counts(strata, data):
    is_ref = np.asarray(
        data.draw(st.lists(st.booleans(), min_size=len(strata), max_size=len(strata)))
    )
    strata = np.asarray(strata)
    z = stratified_labels(strata, is_ref.astype(np.float32), 7, np.random.default_rng(0))
    for s in np.unique(strata):
        rows = strata == s
        assert np.all(z[rows].sum(0) == is_ref[rows].sum())
    assert np.array_equal(z[:, 0], is_ref)


def test_null_p_values_are_uniform():
    """200 null pairs: the share at p ≤ 0.05 within the binomial bound and a KS fit to U(0, 1)
    on the p grid (B = 99, so p is on multiples of 1 / 100)."""
    rng = np.random.default_rng(6)
    ps = []
    for _ in range(200):
        s_ref, s_cur = rng.integers(0, 3, 60), rng.integers(0, 3, 40)
        x = np.hstack([rng.normal(size=(60, 4)) + s_ref[:, None], rng.normal(size=(60, 2))])
        y = np.hstack([rng.normal(size=(40, 4)) + s_cur[:, None], rng.normal(size=(40, 2))])
        res = response_agg_test(
            x, y, threshold=0.05, rng=rng, blocks=(("e", 0, 4), ("s", 4, 6)),
            ref_strata=s_ref, cur_strata=s_cur, n_permutations=99,
        )  # fmt: skip
        ps.append(res.p_value)
    ps = np.asarray(ps)
    assert np.sum(ps <= 0.05) <= stats.binom.ppf(0.999, 200, 0.05)
    jitter = np.random.default_rng(0).uniform(-0.01, 0.0, ps.size)  # spread the grid
    assert stats.kstest(ps + jitter, "uniform").pvalue > 0.001


@pytest.fixture(scope="module")
def world():
    rng = np.random.default_rng(3)
    ref = extract_features(frame(rng, 600))
    model = fit_clusters(ref.embeddings["prompt_embedding"].vectors, rng=rng)
    return ref, Frozen(clusters={"prompt_embedding": model})


def _inputs(frozen, rng):
    return TestInputs(frozen=frozen, levels=Levels(), options=BatteryOptions(), rng=rng)


def test_prompt_mix_alone_is_not_evidence_but_a_model_change_is(world):
    ref, frozen = world
    rng = np.random.default_rng(8)
    mixed = extract_features(frame(rng, 300, 0.0, mix=(0.1, 0.2, 0.3, 0.4)))
    [res] = aggregate_results(get_test("response_agg"), ref, mixed, _inputs(frozen, rng))
    assert res.feature == "responses" and not res.drifted, res.p_value
    assert res.detail["columns"][:2] == ["mean_logprob", "mean_entropy"]
    changed = extract_features(frame(rng, 300, 0.4))
    [res] = aggregate_results(get_test("response_agg"), ref, changed, _inputs(frozen, rng))
    assert res.drifted and res.p_value <= 0.001


def test_more_power_than_the_single_kernel_tests_at_a_small_change(world):
    """Change 0.2 (half the conditional tests' measured 80 % point), α = 0.001: the aggregated
    test finds at least as many windows as the two conditional MMDs together (measured: its
    largest kernel z 8-12 where the conditional MMDs read p = 0.001-0.006 and 0.08-0.3)."""
    from drift.detectors.prompt_response import conditional_results

    ref, frozen = world
    rng = np.random.default_rng(9)
    agg = single = 0
    for _ in range(6):
        cur = extract_features(frame(rng, 300, 0.2))
        agg += aggregate_results(get_test("response_agg"), ref, cur, _inputs(frozen, rng))[
            0
        ].drifted
        single += any(
            r.drifted
            for r in conditional_results(
                get_test("conditional_mmd"), ref, cur, _inputs(frozen, rng)
            )
        )
    assert agg >= max(single, 4), (agg, single)


@settings(max_examples=20, deadline=None)
@given(
    n_ref=st.integers(0, 60),
    n_cur=st.integers(0, 60),
    bad=st.sampled_from([np.nan, np.inf, -np.inf, 0.0]),
)
def test_odd_inputs_give_a_result_or_insufficient(n_ref, n_cur, bad):
    rng = np.random.default_rng(n_ref * 100 + n_cur)
    x, y = rng.normal(size=(n_ref, 3)), rng.normal(size=(n_cur, 3))
    if n_ref:
        x[0, 1] = bad
    res = response_agg_test(x, y, threshold=0.01, rng=rng, n_permutations=99, min_samples=30)
    if min(n_ref - (bad != 0.0), n_cur) < 30:
        assert res.insufficient and not res.drifted
    else:
        assert 0.0 < res.p_value <= 1.0 and np.isfinite(res.statistic)


def test_mismatched_widths_and_strata_are_refused():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="dimension"):
        response_agg_test(np.zeros((40, 3)), np.zeros((40, 4)), threshold=0.01, rng=rng)
    with pytest.raises(ValueError, match="stratum"):
        response_agg_test(
            np.zeros((40, 3)), np.zeros((40, 3)), threshold=0.01, rng=rng, ref_strata=np.zeros(3)
        )


def test_a_drifted_result_is_model_side_evidence():
    from drift.alerting.attribution import attribute_alerts
    from drift.alerting.custom_rules import DEFAULT_RULES
    from drift.alerting.proposals import propose_alerts

    hit = TestResult("response_agg", 9.0, 0.001, 0.001, True, feature="responses")
    [alert] = attribute_alerts(
        propose_alerts([hit], DEFAULT_RULES, {"*": {"n_current": 300}}), [hit]
    )
    assert alert.rule == "response_shift" and alert.kind == "model"
    assert alert.evidence["attribution"]["confidence"] == "clear"
