"""New-cluster detection on embeddings: what the baseline had never seen, and how much of it.

Fit: k-means on the baseline's embeddings (k chosen by the best silhouette on a subsample), and
per cluster a radius = the `radius_quantile` of its members' distances to the centroid; plus a
`link_distance` = the typical within-cluster diameter, the scale a "coherent group" must keep.

Detect, in a window: a point is novel when it lies beyond the radius of its nearest centroid
(≈ 1 % of points under no drift). Novel points are grouped by average-linkage clustering cut at
`link_distance` (a group's points are on average as close as members of one baseline cluster); a
group holding ≥ `min_share` of the window (default 10 %) whose centre itself lies outside every
baseline cluster is a new cluster, reported with representative rows. (The centre test keeps
a merely widened baseline cluster — whose novel points surround the old centre — from
passing for a new one.) A small baseline cluster whose in-radius share grows significantly
(one-sided Fisher exact test) and materially is reported as growth.
"""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch
from scipy import stats
from sklearn.cluster import AgglomerativeClustering, KMeans, MiniBatchKMeans
from sklearn.metrics import silhouette_score
from threadpoolctl import threadpool_limits

from drift.result import TestResult, insufficient


def _dists(x: np.ndarray, c: np.ndarray) -> np.ndarray:
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
        d = _dists(np.asarray(x, dtype=np.float32), self.centroids)
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
    for k in range(2, max(2, min(k_max, len(fit_x) // 10)) + 1):
        model = (
            KMeans(k, n_init=3, random_state=seed)
            if len(fit_x) <= 5000
            else MiniBatchKMeans(k, n_init=3, random_state=seed, batch_size=4096)
        )
        labels = model.fit_predict(fit_x)
        if len(np.unique(labels)) < 2:
            continue
        score = float(
            silhouette_score(
                fit_x, labels, sample_size=min(silhouette_points, len(fit_x)), random_state=seed
            )
        )
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
        d = _dists(pick, pick)[np.triu_indices(len(pick), 1)]
        diam.append(np.quantile(d, 0.99))
    return float(np.median(diam)) if diam else 0.0


@dataclass
class NewCluster:
    size: int  # estimated points in the window
    share: float
    representatives: list[int]  # window row indices closest to the group's centre
    centre_distance: float  # from the group's centre to the nearest baseline centroid
    nearest_radius: float


@dataclass
class ClusterGrowth:
    cluster: int
    baseline_share: float
    window_share: float
    p_value: float


@dataclass
class ClusterReport:
    n: int
    novel_count: int
    new_clusters: list[NewCluster] = field(default_factory=list)
    grown: list[ClusterGrowth] = field(default_factory=list)
    min_share: float = 0.10

    @property
    def novel_share(self) -> float:
        return self.novel_count / self.n if self.n else 0.0

    def results(self) -> list[TestResult]:
        """The two outcomes in the common result shape: `new_cluster` and `cluster_growth`."""
        top = max((c.share for c in self.new_clusters), default=0.0)
        growth = max(
            (g.window_share / max(g.baseline_share, 1e-12) for g in self.grown), default=0.0
        )
        common = {"n_current": self.n, "novel_share": self.novel_share}
        return [
            TestResult(
                "new_cluster",
                top,
                None,
                self.min_share,
                bool(self.new_clusters),
                detail={**common, "clusters": [asdict(c) for c in self.new_clusters]},
            ),
            TestResult(
                "cluster_growth",
                growth,
                min((g.p_value for g in self.grown), default=None),
                None,
                bool(self.grown),
                detail={**common, "grown": [asdict(g) for g in self.grown]},
            ),
        ]


def detect_clusters(
    model: ClusterModel,
    x: np.ndarray,
    *,
    rng: np.random.Generator,
    min_share: float = 0.10,
    max_group_points: int = 2000,
    n_representatives: int = 5,
    small_share: float = 0.15,
    growth_factor: float = 2.0,
    min_growth: float = 0.05,
    growth_alpha: float = 0.001,
) -> ClusterReport:
    x = np.asarray(x, dtype=np.float32)
    labels, dist = model.assign(x)
    novel = dist > model.radii[labels]
    report = ClusterReport(n=len(x), novel_count=int(novel.sum()), min_share=min_share)
    novel_idx = np.flatnonzero(novel)
    if novel_idx.size >= max(2, int(np.ceil(min_share * len(x) * 0.5))):
        pick = (
            novel_idx
            if novel_idx.size <= max_group_points
            else np.sort(rng.choice(novel_idx, max_group_points, replace=False))
        )
        with threadpool_limits(1):
            groups = AgglomerativeClustering(
                n_clusters=None,
                linkage="average",
                distance_threshold=max(model.link_distance, 1e-9),
            ).fit_predict(x[pick])
        scale = novel_idx.size / pick.size  # groups were found on a subsample of the novel points
        for g in np.unique(groups):
            members = pick[groups == g]
            share = members.size * scale / len(x)
            if share < min_share:
                continue
            centre = x[members].mean(0, keepdims=True)
            c_label, c_dist = model.assign(centre)
            if c_dist[0] <= model.radii[c_label[0]]:
                continue  # a widened baseline cluster, not a new one
            closest = members[np.argsort(_dists(x[members], centre)[:, 0])[:n_representatives]]
            report.new_clusters.append(
                NewCluster(
                    int(round(members.size * scale)),
                    float(share),
                    closest.tolist(),
                    float(c_dist[0]),
                    float(model.radii[c_label[0]]),
                )
            )
    inside = np.bincount(labels[~novel], minlength=model.k)
    base_total = int(model.counts.sum())
    for j in np.flatnonzero(model.shares <= small_share):
        q = inside[j] / len(x)
        if q < growth_factor * model.shares[j] or q - model.shares[j] < min_growth:
            continue
        table = [
            [int(inside[j]), len(x) - int(inside[j])],
            [int(model.counts[j]), base_total - int(model.counts[j])],
        ]
        p = float(stats.fisher_exact(table, alternative="greater").pvalue)
        if p < growth_alpha:
            report.grown.append(ClusterGrowth(int(j), float(model.shares[j]), float(q), p))
    return report


def cluster_results(
    model: ClusterModel | None,
    x: np.ndarray,
    *,
    rng: np.random.Generator,
    min_samples: int = 50,
    **kwargs,
) -> list[TestResult]:
    """detect_clusters in the common result shape, or two insufficient results."""
    if model is None or len(x) < min_samples:
        n_ref = 0 if model is None else int(model.counts.sum())
        return [
            insufficient(name, None, n_ref, len(x), min_samples)
            for name in ("new_cluster", "cluster_growth")
        ]
    return detect_clusters(model, x, rng=rng, **kwargs).results()
