"""The baseline's clusters of embeddings: centroids, radii and the scale of a coherent group.

Fit: k-means on the baseline's embeddings (k chosen by the best silhouette on a subsample), and
per cluster a radius = the `radius_quantile` of its members' distances to the centroid; plus a
`link_distance` = the typical within-cluster diameter, the scale a "coherent group" must keep.
Detection in a window against this model: drift.detectors.clusters.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, replace

import numpy as np
import torch
from sklearn.cluster import KMeans, MiniBatchKMeans
from sklearn.metrics import pairwise_distances, silhouette_score
from sklearn.utils import check_random_state
from threadpoolctl import threadpool_limits


def distances(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Euclidean distances (n, k), in chunks so a 1M-row window doesn't build one huge matrix."""
    ct = torch.from_numpy(np.ascontiguousarray(c, dtype=np.float32))
    out = []
    for s in range(0, len(x), 65536):
        xt = torch.from_numpy(np.ascontiguousarray(x[s : s + 65536], dtype=np.float32))
        d = (xt * xt).sum(1)[:, None] + (ct * ct).sum(1)[None, :] - 2.0 * xt @ ct.T
        out.append(d.clamp_min_(0).sqrt_().numpy())
    return np.concatenate(out) if out else np.empty((0, len(c)), np.float32)


@dataclass
class ClusterModel:
    centroids: np.ndarray  # (k, dim) float32
    radii: np.ndarray  # (k,)
    shares: np.ndarray  # (k,) baseline share of members
    counts: np.ndarray  # (k,) baseline member counts
    link_distance: float
    silhouette: float
    radius_quantile: float

    @property
    def k(self) -> int:
        return len(self.centroids)

    def assign(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Nearest centroid and the distance to it, per row."""
        d = distances(np.asarray(x, dtype=np.float32), self.centroids)
        labels = d.argmin(1)
        return labels, d[np.arange(len(d)), labels]

    def with_counts(self, x: np.ndarray) -> ClusterModel:
        """The same clusters with member counts/shares from `x` (e.g. one segment's baseline)."""
        labels, _ = self.assign(x)
        counts = np.bincount(labels, minlength=self.k).astype(np.float64)
        shares = counts / max(counts.sum(), 1.0)
        return replace(self, counts=counts, shares=shares)

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        np.savez(
            buf,
            centroids=self.centroids,
            radii=self.radii,
            shares=self.shares,
            counts=self.counts,
            scalars=np.array([self.link_distance, self.silhouette, self.radius_quantile]),
        )
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> ClusterModel:
        z = np.load(io.BytesIO(data))
        link, sil, q = (float(v) for v in z["scalars"])
        return cls(z["centroids"], z["radii"], z["shares"], z["counts"], link, sil, q)


# one BLAS/OpenMP thread: on a machine with few shared cores sklearn's thread pools
# oversubscribe and run ~10x slower than single-threaded (measured: 2.6 s vs 0.2 s for 9 small fits)
@threadpool_limits.wrap(limits=1)
def fit_clusters(
    x: np.ndarray,
    *,
    rng: np.random.Generator,
    k_max: int = 10,
    max_fit: int = 10_000,
    silhouette_points: int = 2000,
    radius_quantile: float = 0.99,
) -> ClusterModel:
    """k-means with k in 2..k_max picked by silhouette (subsampled); radii from all of `x`."""
    x = np.asarray(x, dtype=np.float32)
    if len(x) < 20:
        raise ValueError(f"need at least 20 embeddings to cluster, got {len(x)}")
    fit_x = x[rng.choice(len(x), max_fit, replace=False)] if len(x) > max_fit else x
    seed = int(rng.integers(2**31 - 1))
    best = _best_centroids(fit_x, k_max=k_max, silhouette_points=silhouette_points, seed=seed)
    if best is None:  # all points identical: one cluster
        best = (0.0, x[:1].copy())
    score, centroids = best
    model = ClusterModel(
        centroids,
        np.zeros(len(centroids)),
        np.zeros(len(centroids)),
        np.zeros(len(centroids)),
        0.0,
        score,
        radius_quantile,
    )
    labels, dist = model.assign(x)
    counts = np.bincount(labels, minlength=model.k).astype(np.float64)
    radii = np.array(
        [
            np.quantile(dist[labels == j], radius_quantile) if counts[j] >= 10 else np.nan
            for j in range(model.k)
        ]
    )
    fallback = np.nanmedian(radii) if np.isfinite(radii).any() else float(dist.max())
    model.radii = np.where(np.isfinite(radii), radii, fallback)
    model.counts, model.shares = counts, counts / counts.sum()
    model.link_distance = _link_distance(x, labels, model.k, rng)
    return model


def _best_centroids(
    fit_x: np.ndarray, *, k_max: int, silhouette_points: int, seed: int
) -> tuple[float, np.ndarray] | None:
    """(silhouette, centroids) of the best k, or None when no k splits the points."""
    best = None
    # the silhouette's subsample is the same for every k (sklearn draws it from the seed and the
    # row count alone): its distances are computed once and shared
    picked = check_random_state(seed).permutation(len(fit_x))[:silhouette_points]
    picked_distances = pairwise_distances(fit_x[picked])
    for k in range(2, max(2, min(k_max, len(fit_x) // 10)) + 1):
        model = (
            KMeans(k, n_init=3, random_state=seed)
            if len(fit_x) <= 5000
            else MiniBatchKMeans(k, n_init=3, random_state=seed, batch_size=4096)
        )
        labels = model.fit_predict(fit_x)
        if len(np.unique(labels)) < 2:
            continue
        score = float(silhouette_score(picked_distances, labels[picked], metric="precomputed"))
        if best is None or score > best[0]:
            best = (score, model.cluster_centers_.astype(np.float32))
    return best


def _link_distance(x, labels, k, rng, per_cluster: int = 200) -> float:
    """Median over clusters of the 0.99 quantile of within-cluster pairwise distances."""
    diam = []
    for j in range(k):
        members = np.flatnonzero(labels == j)
        if members.size < 5:
            continue
        pick = x[rng.choice(members, min(per_cluster, members.size), replace=False)]
        d = distances(pick, pick)[np.triu_indices(len(pick), 1)]
        diam.append(np.quantile(d, 0.99))
    return float(np.median(diam)) if diam else 0.0
