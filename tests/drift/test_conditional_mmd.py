"""conditional_mmd: brute-force statistic and exact p-value on a tiny case, calibration under no
change, power on a model change with prompts steady, and silence when only the prompt mix moved."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from drift.baseline.cluster_model import fit_clusters
from drift.battery_inputs import BatteryOptions, Frozen, Levels, TestInputs
from drift.detectors.prompt_response import conditional_results
from drift.features.feature_set import extract_features
from drift.registry import get_test
from drift.stattests.conditional_mmd import stratified_mmd_test

PD, RD = 32, 16
_W = np.random.default_rng(11)
PROMPT_CENTRES = _W.normal(size=(4, PD)) * 2.5
RESPONSE_CENTRES = _W.normal(size=(4, RD)) * 2.5
LOGPROB = _W.normal(-0.6, 0.1, 4)
TOKENS = _W.integers(60, 200, 4)
DIRECTION = _W.normal(size=RD) / np.sqrt(RD)
MIX = (0.4, 0.3, 0.2, 0.1)


def frame(rng, n, change=0.0, mix=MIX):
    """Responses depend on the prompt's topic; `change` models a new model: response embeddings
    move by about `change` sd per coordinate along one direction (norm ~4 x `change`, against a
    noise radius of 4 and topic gaps of ~14), mean logprob drops `change` x its sd, completions
    grow by 10 x `change` %."""
    topic = rng.choice(4, n, p=mix)
    prompts = PROMPT_CENTRES[topic] + rng.normal(size=(n, PD))
    responses = (
        RESPONSE_CENTRES[topic] + rng.normal(size=(n, RD)) + change * DIRECTION * np.sqrt(RD)
    )
    return pd.DataFrame(
        {
            "prompt_embedding": list(prompts.astype(np.float32)),
            "response_embedding": list(responses.astype(np.float32)),
            "mean_logprob": rng.normal(LOGPROB[topic] - 0.15 * change, 0.15),
            "mean_entropy": rng.gamma(4.0, 0.3, n),
            "completion_tokens": rng.poisson(TOKENS[topic] * (1 + 0.1 * change)) + 1,
        }
    )


@pytest.fixture(scope="module")
def world():
    rng = np.random.default_rng(3)
    ref = extract_features(frame(rng, 600))
    model = fit_clusters(ref.embeddings["prompt_embedding"].vectors, rng=rng)
    return ref, Frozen(clusters={"prompt_embedding": model})


def _mmd2_loops(x, y, sigma):
    k = lambda a, b: np.exp(-np.sum((a - b) ** 2) / (2 * sigma**2))  # noqa: E731
    m, n = len(x), len(y)
    sxx = sum(k(x[i], x[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
    syy = sum(k(y[i], y[j]) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    sxy = sum(k(x[i], y[j]) for i in range(m) for j in range(n)) / (m * n)
    return sxx + syy - 2 * sxy


def test_statistic_and_p_value_match_brute_force_on_a_tiny_case():
    """Two strata (3+3 and 2+3 rows): every within-stratum relabelling (20 x 10 = 200) gives
    the exact permutation distribution; the Monte Carlo p with 19,999 draws lands on it."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(5, 2))
    y = rng.normal(0.8, 1, size=(6, 2))  # noqa: E702
    sx, sy = np.array([0, 0, 0, 1, 1]), np.array([0, 0, 0, 1, 1, 1])
    sigma = 1.3

    def statistic(xs, ys):  # weights: window rows per stratum (3 and 3 of 6)
        return sum(
            (ys_s.shape[0] / len(ys)) * _mmd2_loops(xs_s, ys_s, sigma)
            for xs_s, ys_s in ((xs[:3], ys[:3]), (xs[3:], ys[3:]))
        )

    observed = statistic(x, y)
    pooled = [np.vstack([x[:3], y[:3]]), np.vstack([x[3:], y[3:]])]
    perm_stats = []
    for a in itertools.combinations(range(6), 3):
        for b in itertools.combinations(range(5), 2):
            xa = np.vstack([pooled[0][list(a)], pooled[1][list(b)]])
            ya = np.vstack([np.delete(pooled[0], list(a), 0), np.delete(pooled[1], list(b), 0)])
            perm_stats.append(statistic(xa, ya))
    exact_p = np.mean(np.array(perm_stats) >= observed - 1e-12)
    res = stratified_mmd_test(
        x,
        y,
        threshold=0.05,
        rng=rng,
        ref_strata=sx,
        cur_strata=sy,
        bandwidth=sigma,
        n_permutations=19_999,
        min_stratum=2,
        min_samples=4,
    )
    assert res.statistic == pytest.approx(observed, rel=1e-5)
    assert res.p_value == pytest.approx(exact_p, abs=0.01)


def test_null_rate_within_alpha():
    rng = np.random.default_rng(6)
    hits = 0
    for _ in range(200):
        s_ref, s_cur = rng.integers(0, 3, 80), rng.integers(0, 3, 60)
        x = rng.normal(size=(80, 4)) + s_ref[:, None]
        y = rng.normal(size=(60, 4)) + s_cur[:, None]
        hits += stratified_mmd_test(
            x, y, threshold=0.05, rng=rng, ref_strata=s_ref, cur_strata=s_cur, n_permutations=199
        ).drifted
    assert hits <= stats.binom.ppf(0.999, 200, 0.05), hits


def test_model_change_with_prompts_steady_is_found(world):
    """Measured at change 0.4 (embeddings 0.4 sd per coordinate, logprob 0.4 sd, +4 % tokens),
    20 windows of 300 against 600 baseline rows, α = 0.001: response_embedding 20/20,
    response_stats 19/20, plain response MMD 1/20; no change: 0/20 for both."""
    ref, frozen = world
    rng = np.random.default_rng(7)
    opt, levels = BatteryOptions(), Levels()

    def detected(change):
        inputs = TestInputs(frozen=frozen, levels=levels, options=opt, rng=rng)
        results = conditional_results(
            get_test("conditional_mmd"), ref, extract_features(frame(rng, 300, change)), inputs
        )
        assert {r.feature for r in results} == {"response_embedding", "response_stats"}
        return any(r.drifted for r in results)

    assert np.mean([detected(0.4) for _ in range(15)]) >= 0.8
    assert sum(detected(0.0) for _ in range(10)) <= 1  # two tests at α = 0.001 each


def test_prompt_mix_change_alone_moves_plain_mmd_but_not_conditional(world):
    """Responses follow prompts: a new topic mix shifts the response cloud (plain MMD fires),
    but within each prompt cluster nothing changed."""
    ref, frozen = world
    rng = np.random.default_rng(8)
    cur = extract_features(frame(rng, 400, 0.0, mix=(0.1, 0.2, 0.3, 0.4)))
    plain = get_test("mmd").run(
        ref.embeddings["response_embedding"].vectors,
        cur.embeddings["response_embedding"].vectors,
        rng=rng,
    )
    assert plain.drifted
    results = conditional_results(
        get_test("conditional_mmd"),
        ref,
        cur,
        TestInputs(frozen=frozen, levels=Levels(), options=BatteryOptions(), rng=rng),
    )
    assert not any(r.drifted for r in results), [(r.feature, r.p_value) for r in results]
