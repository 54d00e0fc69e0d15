"""The cluster model's k choice: the shared silhouette subsample scores every k exactly as
sklearn's own subsampled silhouette does."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score

from drift.baseline.cluster_model import _best_centroids


@pytest.mark.parametrize("n", [300, 2600])
def test_best_k_matches_sklearn_subsampled_silhouette(n):
    rng = np.random.default_rng(n)
    x = (rng.normal(size=(n, 8)) + rng.integers(0, 4, n)[:, None] * 3).astype(np.float32)
    seed, points = 5, 2000
    want = None
    for k in range(2, 11):
        labels = KMeans(k, n_init=3, random_state=seed).fit_predict(x)
        score = silhouette_score(x, labels, sample_size=min(points, n), random_state=seed)
        if want is None or score > want[0]:
            want = (score, k)
    score, centroids = _best_centroids(x, k_max=10, silhouette_points=points, seed=seed)
    assert len(centroids) == want[1]
    assert score == pytest.approx(want[0], rel=1e-5)
