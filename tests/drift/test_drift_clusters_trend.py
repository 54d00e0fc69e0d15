"""New-cluster / growth detection details and the eval-score trend."""

from __future__ import annotations

import numpy as np
import pytest

from drift.baseline.cluster_model import ClusterModel, fit_clusters
from drift.detectors.clusters import detect_clusters
from drift.detectors.eval_trend import eval_trend_test


@pytest.fixture(scope="module")
def world():
    rng = np.random.default_rng(60)
    centres = rng.normal(size=(4, 24)) * 3

    def draw(n, weights=(0.4, 0.3, 0.2, 0.1)):
        labels = rng.choice(4, n, p=list(weights))
        return (centres[labels] + rng.normal(size=(n, 24))).astype(np.float32)

    model = fit_clusters(draw(2000), rng=rng)
    return rng, centres, draw, model


def test_k_is_chosen_by_silhouette(world):
    _, _, _, model = world
    assert model.k == 4 and model.silhouette > 0.3
    assert model.shares.sum() == pytest.approx(1.0) and np.all(model.radii > 0)


def test_small_cluster_growth_is_reported(world):
    rng, _, draw, model = world
    small = int(np.argmin(model.shares))
    report = detect_clusters(model, draw(400, (0.3, 0.2, 0.2, 0.3)), rng=rng)
    assert [g.cluster for g in report.grown] == [small]
    assert report.grown[0].window_share > 2 * report.grown[0].baseline_share
    assert not detect_clusters(model, draw(400), rng=rng).grown


def test_widened_clusters_are_not_new_and_threshold_is_configurable(world):
    rng, centres, draw, model = world
    wide = draw(400) + rng.normal(size=(400, 24)).astype(np.float32)  # sd x1.4
    report = detect_clusters(model, wide, rng=rng)
    assert report.novel_share > 0.3 and not report.new_clusters
    new = draw(400)
    new[:24] = rng.normal(size=24) * 3 + rng.normal(size=(24, 24))  # a 6 % group
    assert not detect_clusters(model, new, rng=rng).new_clusters
    found = detect_clusters(model, new, rng=rng, min_share=0.05).new_clusters
    assert len(found) == 1 and set(found[0].representatives) <= set(range(24))


def test_cluster_model_round_trips(world):
    _, _, draw, model = world
    again = ClusterModel.from_bytes(model.to_bytes())
    x = draw(50)
    assert np.array_equal(again.assign(x)[0], model.assign(x)[0])
    assert again.link_distance == model.link_distance


def test_eval_trend_needs_both_size_and_significance():
    rng = np.random.default_rng(61)
    base = rng.normal(0.8, 0.05, 500)
    big = eval_trend_test(base, rng.normal(0.72, 0.05, 200))
    assert big.drifted and big.statistic == pytest.approx(0.1, abs=0.02) and big.p_value < 1e-6
    tiny = eval_trend_test(base, rng.normal(0.79, 0.05, 5000))  # significant, but ~1 %
    assert tiny.p_value < 0.01 and not tiny.drifted
    noisy = eval_trend_test(base, rng.normal(0.74, 0.5, 25))  # 7 % but very noisy
    assert noisy.statistic > 0.05 and not noisy.drifted


def test_eval_trend_uses_the_trailing_seven_days():
    rng = np.random.default_rng(62)
    base = rng.normal(0.8, 0.05, 500)
    ts = np.concatenate([np.linspace(0, 5 * 86400, 300), np.linspace(20 * 86400, 26 * 86400, 300)])
    scores = np.concatenate([rng.normal(0.6, 0.05, 300), rng.normal(0.8, 0.05, 300)])
    res = eval_trend_test(base, scores, timestamps=ts)
    assert res.detail["n_current"] == 300 and not res.drifted  # the bad, old days are out
