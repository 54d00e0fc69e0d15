"""New-cluster detection on embeddings: what the baseline had never seen, and how much of it.

The baseline's clusters (centroids, radii, link distance) are fitted by
drift.baseline.cluster_model.

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

from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import stats
from sklearn.cluster import AgglomerativeClustering
from threadpoolctl import threadpool_limits

from drift.baseline.cluster_model import ClusterModel, distances
from drift.result import TestResult, insufficient


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
            closest = members[np.argsort(distances(x[members], centre)[:, 0])[:n_representatives]]
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
