"""Sample weights: the whole-window ("*") comparison represents the population, not the sample.

Synthetic traffic: segment A (80 % of the population) and B (20 %, different features and
embeddings). The engine logs A at a base rate of 10 % (weight 10) and, in the window, B at 50 %
(the per-segment minimum: over-sampled 5x, weight 2). The population mix never changes, so
the right answer is "no drift"; the unweighted sample's mix (B 56 % instead of 20 %) drifts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from drift_synth import make_samples
from scipy import stats

from drift.baseline.build import build_baseline
from drift.battery import BatteryOptions
from drift.features.feature_set import EmbeddingBlock, FeatureSet
from drift.features.weights import (
    Population,
    block_rows_to_original,
    effective_sample_size,
    population_sample,
    thinning_rows,
)
from drift.run import run_drift

DIM = 8
_CENTRES = np.random.default_rng(2024).normal(size=(2, DIM)) * 2.0
OPTS = BatteryOptions(
    tests=("psi", "ks", "wasserstein", "mmd"), mmd_permutations=199, mmd_max_samples=500
)
P_TESTS = ("ks", "mmd")  # p-value tests: their threshold is the nominal level
N_SEEDS = 24


def stratum(rng, segment: str, n: int, weight: float) -> pd.DataFrame:
    b = segment == "B"
    return pd.DataFrame(
        {
            "tenant": segment,
            "prompt_tokens": rng.poisson(90 if b else 40, n),
            "latency_ms": rng.gamma(5.0, 60.0 if b else 20.0, n),
            "prompt_embedding": list(
                (_CENTRES[int(b)] + rng.normal(size=(n, DIM))).astype(np.float32)
            ),
            "sample_weight": weight,
        }
    )


def traffic(seed: int, n_a: int, w_a: float, n_b: int, w_b: float) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.concat([stratum(rng, "A", n_a, w_a), stratum(rng, "B", n_b, w_b)], ignore_index=True)
    return frame.iloc[rng.permutation(len(frame))].reset_index(drop=True)


def unweighted(frame: pd.DataFrame) -> pd.DataFrame:
    """The same rows as code without weights sees them: no sample_weight column."""
    return frame.drop(columns=["sample_weight"])


def star(report, tests=None):
    return [
        r
        for r in report.results
        if r.segment == "*" and not r.insufficient and (tests is None or r.test in tests)
    ]


@pytest.fixture(scope="module")
def baseline():
    # baseline hour: A and B both at the base rate (equal weights, population mix 80/20)
    return build_baseline(traffic(1000, 1600, 10.0, 400, 10.0), seed=0, cluster=False)


def test_over_sampled_segment_is_no_drift_with_weights_and_drift_without(baseline):
    weighted_hits, unweighted_seeds, p_trials = 0, 0, 0
    for seed in range(N_SEEDS):
        window = traffic(seed, 800, 10.0, 1000, 2.0)  # population 8000 A : 2000 B, as ever
        rep = run_drift(baseline, window, segment_by=[], rng_seed=seed, options=OPTS)
        res = star(rep)
        assert res and all(r.detail["weighted"] for r in res)
        d = res[0].detail
        assert d["ess_current"] == pytest.approx((8000 + 2000) ** 2 / (800 * 100 + 1000 * 4))
        assert d["n_resampled_current"] in (999, 1000, 1001)  # all 800 A + 1000 * 2/10 B
        assert d["ess_reference"] == d["n_resampled_reference"] == 2000  # equal weights: as is
        assert not any(r.drifted for r in res if r.test in ("psi", "wasserstein")), res
        weighted_hits += sum(r.drifted for r in res if r.test in P_TESTS)
        p_trials += sum(r.test in P_TESTS for r in res)
        plain = run_drift(baseline, unweighted(window), segment_by=[], rng_seed=seed, options=OPTS)
        assert not any("weighted" in r.detail for r in star(plain))
        unweighted_seeds += any(r.drifted for r in star(plain, P_TESTS)) and any(
            r.drifted for r in star(plain, ("psi",))
        )
    alpha = star(rep, ("ks",))[0].threshold
    # within the nominal level: no more false alerts than a 99.9 % binomial bound at alpha
    bound = stats.binom.ppf(0.999, p_trials, alpha)
    print(
        f"weighted: {weighted_hits}/{p_trials} p-value tests drifted (alpha={alpha}, "
        f"bound {bound:.0f}); unweighted: {unweighted_seeds}/{N_SEEDS} seeds drifted"
    )
    assert weighted_hits <= bound
    assert unweighted_seeds == N_SEEDS  # the test can fail: without weights it is drift


def test_weighted_baseline_is_thinned_too():
    """The baseline over-samples B 5x, the window does not: weights on the reference side."""
    base = build_baseline(traffic(2000, 1600, 10.0, 2000, 2.0), seed=0, cluster=False)
    window = traffic(2001, 800, 10.0, 200, 10.0)
    rep = run_drift(base, window, segment_by=[], rng_seed=5, options=OPTS)
    res = star(rep)
    assert not any(r.drifted for r in res), res
    assert res[0].detail["n_resampled_reference"] == pytest.approx(2000, abs=1)
    assert res[0].detail["n_resampled_current"] == 1000
    plain = build_baseline(unweighted(traffic(2000, 1600, 10.0, 2000, 2.0)), seed=0, cluster=False)
    assert any(
        r.drifted for r in star(run_drift(plain, window, segment_by=[], rng_seed=5, options=OPTS))
    )
    assert (
        base.population().features.embeddings["prompt_embedding"].vectors.shape[0]
        == base.population().features.n
    )  # embeddings thinned in step with the rows


def test_equal_weights_give_the_unweighted_results_exactly():
    ref, cur = (
        make_samples(500, seed=60),
        make_samples(300, seed=61, t0=1.7e9 + 7200, drift="persona"),
    )
    reports = []
    for w in (None, 4.0):
        r, c = ref.copy(), cur.copy()
        if w is not None:
            r["sample_weight"], c["sample_weight"] = w, w
        b = build_baseline(r, seed=0)
        rep = run_drift(
            b, c, segment_by=["tenant"], rng_seed=3, options=BatteryOptions(mmd_permutations=199)
        )
        reports.append({k: v for k, v in rep.to_dict(full=True).items() if k != "timings"})
    assert reports[0]["results"] and reports[0] == reports[1]
    assert not any("weighted" in r["detail"] for r in reports[1]["results"])


def test_effective_sample_size_matches_the_hand_formula():
    assert effective_sample_size(np.array([1.0, 2.0, 3.0, 4.0])) == pytest.approx(100 / 30)
    assert effective_sample_size(np.full(7, 3.5)) == pytest.approx(7.0)
    w = np.random.default_rng(0).gamma(2.0, 3.0, 500)
    assert effective_sample_size(w) == pytest.approx(w.sum() ** 2 / (w**2).sum())
    assert effective_sample_size(np.array([])) == 0.0


def test_thinning_keeps_each_row_with_probability_w_over_max_w():
    w = np.array([1.0, 2.0, 2.0, 5.0, 10.0, 10.0, 0.5, 7.0])
    trials = 4000
    kept = np.zeros(w.size)
    for seed in range(trials):
        rows = thinning_rows(w, np.random.default_rng(seed))
        assert np.unique(rows).size == rows.size  # without replacement: no ties added
        assert rows.size in (int(np.floor(w.sum() / w.max())), int(np.ceil(w.sum() / w.max())))
        assert rows.size <= effective_sample_size(w)
        kept[rows] += 1
    expected = w / w.max()
    sd = np.sqrt(expected * (1 - expected) / trials) + 1e-12
    assert np.all(np.abs(kept / trials - expected) <= 4.5 * sd + 1e-12), kept / trials


def test_population_sample_keeps_embeddings_in_step_and_maps_rows_back():
    n = 10
    vecs = np.arange(6 * 2, dtype=np.float32).reshape(6, 2)
    fs = FeatureSet(
        n=n,
        numeric={"x": np.arange(n, dtype=np.float64)},
        embeddings={"e": EmbeddingBlock(np.array([0, 2, 3, 5, 8, 9]), vecs)},
        weights=np.array([1, 4, 1, 4, 4, 1, 1, 4, 4, 1], dtype=np.float64),
    )
    pop = population_sample(fs, np.random.default_rng(1))
    assert pop.applied and set(pop.rows) >= {1, 3, 4, 7, 8}  # max-weight rows always kept
    blk = pop.features.embeddings["e"]
    for k, row in enumerate(blk.rows):  # each kept vector still sits with its own row
        orig = pop.rows[row]
        assert pop.features.numeric["x"][row] == orig
        where = list(fs.embeddings["e"].rows).index(orig)
        np.testing.assert_array_equal(blk.vectors[k], vecs[where])
    back = block_rows_to_original(fs, pop, "e", list(range(len(blk.rows))))
    np.testing.assert_array_equal(fs.embeddings["e"].vectors[back], blk.vectors)
    assert not population_sample(
        FeatureSet(n=3, weights=np.full(3, 2.0)), np.random.default_rng(0)
    ).applied
    assert isinstance(population_sample(fs, np.random.default_rng(2)), Population)


def test_bad_weights_are_named():
    from drift.features.feature_set import extract_features

    with pytest.raises(ValueError, match="row 1: sample_weight"):
        extract_features(pd.DataFrame({"prompt_tokens": [1, 2], "sample_weight": [1.0, -3.0]}))
    ok = extract_features(pd.DataFrame({"prompt_tokens": [1, 2], "sample_weight": [2.0, None]}))
    np.testing.assert_array_equal(ok.weights, [2.0, 1.0])  # missing: storage's default 1.0
    assert FeatureSet.from_dict(ok.to_dict()).weights.tolist() == [2.0, 1.0]


def test_validation_compares_the_population_halves():
    """First half a quiet hour (B over-sampled 5x), second half busy: same population mix."""
    from drift.baseline.validate import validate_baseline

    quiet, busy = traffic(3000, 800, 10.0, 1000, 2.0), traffic(3001, 1600, 10.0, 400, 10.0)
    frame = pd.concat([quiet, busy], ignore_index=True)
    frame["timestamp"] = 1.7e9 + np.arange(len(frame), dtype=np.float64)
    opts = BatteryOptions(tests=OPTS.tests, mmd_permutations=199, eval_window_days=float("inf"))
    weighted = validate_baseline(build_baseline(frame, seed=0, cluster=False), options=opts)
    assert weighted.valid, weighted.reasons
    assert weighted.notes and "weighted" in weighted.notes[0]
    plain_base = build_baseline(unweighted(frame), seed=0, cluster=False)
    plain = validate_baseline(plain_base, options=opts)
    assert not plain.valid and plain.reasons


def test_new_cluster_representatives_are_window_rows_after_thinning():
    cur = make_samples(300, seed=62, t0=1.7e9 + 7200, drift="persona")  # rows 0..44: new persona
    k = int(0.15 * len(cur))
    cur = pd.concat([cur.iloc[k:], cur.iloc[:k]], ignore_index=True)  # ... now the last 45 rows
    cur["sample_weight"] = np.where(np.arange(len(cur)) % 2 == 0, 4.0, 1.0)
    cur.loc[len(cur) - k :, "sample_weight"] = 4.0
    base = build_baseline(make_samples(500, seed=60), seed=0)
    rep = run_drift(
        base, cur, segment_by=[], rng_seed=4, options=BatteryOptions(tests=("new_cluster",))
    )
    hit = [r for r in star(rep, ("new_cluster",)) if r.drifted]
    assert hit and hit[0].detail["weighted"] and hit[0].detail["n_resampled_current"] < len(cur)
    reps = hit[0].detail["clusters"][0]["representatives"]
    assert reps and all(i >= len(cur) - k for i in reps), reps  # thinned positions would be < 255
