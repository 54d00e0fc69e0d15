"""Each statistic against an independent computation: hand PSI, scipy, brute-force numpy MMD."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.spatial.distance import cdist

from drift import registry
from drift.detectors.multitest import benjamini_hochberg
from drift.features.categories import OTHER, category_levels
from drift.registry import get_test
from drift.stattests.mmd import median_bandwidth
from drift.stattests.psi import psi_edges
from drift.stattests.wasserstein import w1_distance


def hand_psi(ref: np.ndarray, cur: np.ndarray, edges: np.ndarray, eps: float = 1e-4) -> float:
    """PSI written out bin by bin with plain comparisons (no searchsorted)."""
    bounds = [-math.inf, *edges.tolist(), math.inf]

    def props(x):
        finite = x[~np.isnan(x)]
        c = [
            np.sum((finite > lo) & (finite <= hi))
            for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
        ]
        c.append(np.sum(np.isnan(x)))
        return np.array(c, dtype=float)

    rc, cc = props(ref), props(cur)
    if rc[-1] == 0 and cc[-1] == 0:
        rc, cc = rc[:-1], cc[:-1]
    p = np.maximum(rc / rc.sum(), eps)
    q = np.maximum(cc / cc.sum(), eps)
    p, q = p / p.sum(), q / q.sum()
    return float(sum((qi - pi) * math.log(qi / pi) for pi, qi in zip(p, q, strict=True)))


def test_registry_lists_every_kind():
    assert {s.name for s in registry.tests_for("numeric")} == {
        "psi",
        "ks",
        "wasserstein",
        "eval_trend",
    }
    assert {s.name for s in registry.tests_for("categorical")} == {
        "chi2",
        "js",
        "new_category",
        "new_prompt_template",
    }
    assert {s.name for s in registry.tests_for("embedding")} == {
        "mmd",
        "cluster_mix",
        "conditional_mmd",
        "response_agg",
        "new_cluster",
        "cluster_growth",
        "response_evidence",
    }
    assert {s.name for s in registry.tests_for("numeric", per_feature=True)} == {
        "psi",
        "ks",
        "wasserstein",
    }
    assert {s.name for s in registry.tests_for("word_set")} == {"instruction_ngrams"}
    with pytest.raises(KeyError, match="unknown drift test 'nope'"):
        get_test("nope")


@pytest.mark.parametrize("seed", range(5))
def test_psi_matches_hand_computation(seed):
    rng = np.random.default_rng(seed)
    ref = rng.normal(size=400)
    cur = rng.normal(0.4, 1.3, size=300)
    cur[:7] = np.nan  # exercises the missing-value bin
    cur[7:12] = [-50, 50, 99, -99, 1e6]  # outside the reference range: the open outer bins
    edges = psi_edges(ref)
    res = get_test("psi").run(ref, cur, edges=edges, rng=0)
    assert res.statistic == pytest.approx(hand_psi(ref, cur, edges), rel=1e-12)
    assert res.detail["bins"] == len(edges) + 2


def test_psi_frozen_edges_are_used_and_discrete_bins_merge():
    ref = np.repeat([1.0, 2.0, 3.0], 100)  # quantiles collapse onto 3 values
    edges = psi_edges(ref)
    assert len(edges) < 9
    cur = np.repeat([1.0, 2.0, 3.0], [200, 50, 50])
    res = get_test("psi").run(ref, cur, edges=edges, rng=0)
    assert res.statistic == pytest.approx(hand_psi(ref, cur, edges))
    other = get_test("psi").run(ref, cur, edges=np.array([2.5]), rng=0)  # the frozen edges rule
    assert other.statistic == pytest.approx(hand_psi(ref, cur, np.array([2.5])))
    assert other.statistic != pytest.approx(res.statistic)


@pytest.mark.parametrize("seed", range(3))
def test_ks_matches_scipy_and_brute_force_statistic(seed):
    rng = np.random.default_rng(seed)
    ref, cur = rng.normal(size=300), rng.normal(0.2, 1, size=200)
    res = get_test("ks").run(ref, cur, rng=0)
    sp = stats.ks_2samp(ref, cur)
    grid = np.concatenate([ref, cur])
    brute = max(abs(np.mean(ref <= g) - np.mean(cur <= g)) for g in grid)
    assert res.statistic == pytest.approx(brute) == pytest.approx(sp.statistic)
    assert res.p_value == pytest.approx(sp.pvalue)


def test_wasserstein_matches_quantile_integral():
    rng = np.random.default_rng(3)
    ref, cur = rng.exponential(2.0, 400), rng.exponential(2.5, 400)
    res = get_test("wasserstein").run(ref, cur, rng=0)
    # equal sizes: W1 = mean |sorted(a) - sorted(b)|
    assert res.statistic == pytest.approx(
        np.mean(np.abs(np.sort(ref) - np.sort(cur))) / np.std(ref)
    )


def test_chi2_and_js_match_hand_formulas():
    rng = np.random.default_rng(4)
    ref = rng.choice(["stop", "length", "abort"], 500, p=[0.7, 0.2, 0.1])
    cur = np.concatenate(
        [rng.choice(["stop", "length", "abort"], 380, p=[0.5, 0.4, 0.1]), ["tool_calls"] * 20]
    )  # a level the reference never had -> OTHER
    levels = category_levels(ref)
    chi = get_test("chi2").run(ref, cur, levels=levels, rng=0)
    js = get_test("js").run(ref, cur, levels=levels, rng=0)
    names = [*levels, OTHER]
    rc = np.array([np.sum(ref == n) for n in levels] + [0.0])
    cc = np.array([np.sum(cur == n) for n in levels] + [20.0])
    table = np.vstack([rc, cc])
    expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / table.sum()
    hand_chi = float(((table - expected) ** 2 / expected).sum())
    assert chi.statistic == pytest.approx(hand_chi)
    assert chi.p_value == pytest.approx(stats.chi2.sf(hand_chi, len(names) - 1))
    p, q = rc / rc.sum(), cc / cc.sum()
    m = (p + q) / 2

    def kl(a, b):
        return sum(ai * math.log2(ai / bi) for ai, bi in zip(a, b, strict=True) if ai > 0)

    assert js.statistic == pytest.approx(math.sqrt((kl(p, m) + kl(q, m)) / 2))


def test_tool_names_are_exploded_per_item():
    import pandas as pd

    from drift.features.feature_set import NO_TOOL, extract_features

    fs = extract_features(pd.DataFrame({"tools": [["search", "calc"], [], ["search"]]}))
    assert sorted(fs.categorical_values("tool")) == sorted(["search", "calc", NO_TOOL, "search"])
    assert fs.numeric["tools_count"].tolist() == [2.0, 0.0, 1.0]


def brute_mmd2(x: np.ndarray, y: np.ndarray, sigma: float) -> float:
    kxx = np.exp(-cdist(x, x, "sqeuclidean") / (2 * sigma**2))
    kyy = np.exp(-cdist(y, y, "sqeuclidean") / (2 * sigma**2))
    kxy = np.exp(-cdist(x, y, "sqeuclidean") / (2 * sigma**2))
    m, n = len(x), len(y)
    sxx = sum(kxx[i, j] for i in range(m) for j in range(m) if i != j)
    syy = sum(kyy[i, j] for i in range(n) for j in range(n) if i != j)
    return sxx / (m * (m - 1)) + syy / (n * (n - 1)) - 2 * kxy.sum() / (m * n)


@pytest.mark.parametrize("shift", [0.0, 0.5])
def test_mmd_matches_brute_force_numpy(shift):
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(80, 6)), rng.normal(shift, 1, size=(60, 6))
    res = get_test("mmd").run(x, y, rng=1, n_permutations=99)
    sigma = res.detail["bandwidth"]
    d = cdist(x, x)
    assert sigma == pytest.approx(np.median(d[np.triu_indices(80, 1)]), rel=1e-5)
    assert sigma == pytest.approx(median_bandwidth(x.astype(np.float32), np.random.default_rng(0)))
    assert res.statistic == pytest.approx(brute_mmd2(x, y, sigma), abs=2e-6)


def test_mmd_permutation_p_value_matches_brute_force_permutations():
    """The vectorised permutations equal re-running the brute force on each permuted split."""
    import torch

    from drift.stattests.mmd import _as_tensor, permutation_mmd2, rbf_kernel

    rng = np.random.default_rng(6)
    x, y = rng.normal(size=(30, 4)), rng.normal(0.3, 1, size=(25, 4))
    pooled = np.vstack([x, y])
    sigma = 1.7
    labels = np.concatenate([np.ones(30), np.zeros(25)]).astype(np.float32)
    perms = rng.permuted(np.tile(labels, (20, 1)), axis=1)
    z = np.vstack([labels[None], perms]).T
    k = rbf_kernel(_as_tensor(pooled), _as_tensor(pooled), sigma)
    fast = permutation_mmd2(k, torch.from_numpy(np.ascontiguousarray(z))).numpy()
    for col in range(z.shape[1]):
        mask = z[:, col] == 1
        assert fast[col] == pytest.approx(brute_mmd2(pooled[mask], pooled[~mask], sigma), abs=2e-6)


def test_permutation_p_value_is_never_zero():
    rng = np.random.default_rng(7)
    x, y = rng.normal(size=(100, 5)), rng.normal(10, 1, size=(100, 5))  # blatant shift
    for b in (19, 99, 999):
        res = get_test("mmd").run(x, y, rng=2, n_permutations=b, threshold=0.05)
        assert res.p_value == pytest.approx(1 / (b + 1))
        assert res.p_value > 0 and res.drifted == (res.p_value <= res.threshold)
    # too few permutations for the threshold (min p 0.05 > α 0.001): B is raised to reach α
    res = get_test("mmd").run(x, y, rng=2, n_permutations=19, threshold=0.001)
    assert res.detail["permutations"] == 999 and res.p_value == pytest.approx(0.001) and res.drifted


def test_mmd_is_seeded():
    rng = np.random.default_rng(8)
    x, y = rng.normal(size=(3000, 8)), rng.normal(size=(2500, 8))
    a = get_test("mmd").run(x, y, rng=11, n_permutations=99, max_samples=500)
    b = get_test("mmd").run(x, y, rng=11, n_permutations=99, max_samples=500)
    assert (a.statistic, a.p_value) == (b.statistic, b.p_value)
    assert a.detail["n_reference"] == a.detail["n_current"] == 500  # the subsample cap


def test_benjamini_hochberg_matches_scipy():
    rng = np.random.default_rng(9)
    for _ in range(20):
        p = rng.uniform(size=rng.integers(1, 30)) ** 2
        assert np.allclose(benjamini_hochberg(p), stats.false_discovery_control(p))


def test_insufficient_data_is_never_drift():
    rng = np.random.default_rng(10)
    for name, ref, cur in [
        ("psi", rng.normal(size=500), rng.normal(5, 1, size=10)),
        ("ks", rng.normal(size=500), rng.normal(5, 1, size=5)),
        ("chi2", np.array(["a"] * 500), np.array(["b"] * 5)),
        ("mmd", rng.normal(size=(500, 3)), rng.normal(5, 1, size=(5, 3))),
    ]:
        res = get_test(name).run(ref, cur, rng=0)
        assert res.insufficient and not res.drifted and res.statistic is None


@settings(max_examples=150, derandomize=True, deadline=None)
@given(
    st.lists(st.integers(-5, 5) | st.floats(-1e6, 1e6), min_size=1, max_size=60),
    st.lists(st.integers(-5, 5) | st.floats(-1e6, 1e6), min_size=1, max_size=60),
)
def test_w1_distance_matches_scipy_with_ties(u, v):
    """The merged-order W1 equals scipy's pooled-sort computation, ties and repeats included."""
    u, v = np.sort(np.asarray(u, float)), np.sort(np.asarray(v, float))
    expected = stats.wasserstein_distance(u, v)
    assert w1_distance(u, v) == pytest.approx(
        expected, rel=1e-9, abs=1e-9 * (1 + np.abs(u).max() + np.abs(v).max())
    )
