"""Prompt-mix test: how the window's prompts fill a fine k-means partition of the baseline's.

MMD with a median-heuristic bandwidth sees the whole embedding cloud at the scale of its
largest distances, so a silent rewording that moves 10-15 % of prompts to a nearby region
barely changes it. Here the baseline's prompt embeddings are cut into many small k-means cells
(`partition_for`), each with a radius (the 0.95 quantile of its fitted members' distances).
Two views of one table of counts, baseline row vs window row, are tested: the share of points
outside every cell's radius (moved prompts land just outside the cells they left) and the
occupancy of all cells (prompts moving between known regions); chi-square tests of
homogeneity on both, p = 2 x the smaller p-value (Bonferroni).

Validity: the cells are fitted on one seeded part of the reference and counted on the other
(fitting and counting on the same points would make the reference fit its own cells better
than fresh data does). Cells whose expected count, min(n_ref, n_cur) x baseline share, is
below `min_expected` are pooled into one cell before testing; the pooling reads only the
reference, so under no drift the table is an ordinary two-sample multinomial table and the
p-value is the usual asymptotic chi-square one (tests/drift check the false-alarm rate and the
statistic against scipy.stats.chi2_contingency).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy import stats
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits

from drift.detectors.prompt_response import prompt_mix_results
from drift.result import TestResult, insufficient
from drift.spec import TestSpec, register

MIN_EXPECTED = 5.0
MAX_CELLS = 24
POINTS_PER_CELL = 40  # fitted points per cell: fewer cells for small references
MAX_FIT = 2000
RADIUS_QUANTILE = 0.95  # of the fitted members' distances; the outside share is then measured
_CACHE_SIZE = 64  # baseline partitions: the whole window and each segment


@dataclass(frozen=True)
class Partition:
    """Cell centroids, and the reference rows that were not used to fit them (the counted rows)."""

    centroids: np.ndarray  # (k, dim) float32
    radii: np.ndarray  # (k,) beyond its nearest centroid's radius a point is "outside"
    count_rows: np.ndarray  # int64 rows of the reference counted against the window
    ref_counts: np.ndarray | None = None  # counts of those rows per cell, outside cell last

    @property
    def k(self) -> int:
        return len(self.centroids)

    def assign(self, x: np.ndarray) -> np.ndarray:
        """Nearest cell per row, or k (the outside cell) beyond that cell's radius."""
        x = np.asarray(x, dtype=np.float32)
        c = self.centroids
        d = (x * x).sum(1)[:, None] + (c * c).sum(1)[None, :] - 2.0 * (x @ c.T)
        cell = d.argmin(1)
        dist = np.sqrt(np.maximum(d[np.arange(len(x)), cell], 0.0))
        return np.where(dist > self.radii[cell], self.k, cell)

    def counts(self, x: np.ndarray) -> np.ndarray:
        """Points per cell, the outside cell last (k + 1 entries)."""
        return np.bincount(self.assign(x), minlength=self.k + 1).astype(np.float64)


def _fingerprint(x: np.ndarray) -> str:
    """The cache key of a reference: its shape, column sums and an evenly strided sample of rows
    (hashing every byte of a 100k x 384 reference cost half a second per window)."""
    sample = np.ascontiguousarray(x[:: max(1, len(x) // FINGERPRINT_ROWS)])
    sums = x.sum(axis=0, dtype=np.float64) if x.size else np.zeros(0)
    digest = hashlib.blake2b(sample.tobytes(), digest_size=16)
    digest.update(np.ascontiguousarray(sums).tobytes())
    return digest.hexdigest() + str(x.shape)


FINGERPRINT_ROWS = 2048
_cache: OrderedDict[str, Partition] = OrderedDict()


@threadpool_limits.wrap(limits=1)
def fit_partition(reference: np.ndarray, *, seed: int = 0, max_cells: int = MAX_CELLS) -> Partition:
    """k-means cells on a seeded third of the reference (at most MAX_FIT rows); the rest is
    what gets counted. Deterministic for a given reference and seed."""
    x = np.asarray(reference, dtype=np.float32)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(x))
    n_fit = min(MAX_FIT, len(x) // 3)
    fit_rows, count_rows = order[:n_fit], np.sort(order[n_fit:])
    k = int(np.clip(n_fit // POINTS_PER_CELL, 2, max_cells))
    if n_fit < 2 * k:
        raise ValueError(f"need at least {6 * k} reference rows to partition, got {len(x)}")
    model = KMeans(k, n_init=2, random_state=seed).fit(x[fit_rows])
    centroids = model.cluster_centers_.astype(np.float32)
    dist = np.linalg.norm(x[fit_rows] - centroids[model.labels_], axis=1)
    radii = np.array(
        [
            np.quantile(dist[model.labels_ == j], RADIUS_QUANTILE)
            if np.any(model.labels_ == j)
            else 0.0
            for j in range(k)
        ]
    )
    part = Partition(centroids, radii, count_rows.astype(np.int64))
    return replace(part, ref_counts=part.counts(x[count_rows]))


def partition_for(reference: np.ndarray) -> Partition:
    """The partition of this exact reference, fitted once per process (the same baseline is
    tested every window); the seed comes from the data, so a restart fits the same cells."""
    key = _fingerprint(np.asarray(reference, dtype=np.float32))
    if key in _cache:
        _cache.move_to_end(key)
        return _cache[key]
    part = fit_partition(reference, seed=int(key[:8], 16))
    _cache[key] = part
    while len(_cache) > _CACHE_SIZE:
        _cache.popitem(last=False)
    return part


def pool_small_cells(
    ref_counts: np.ndarray, n_small_side: int, min_expected: float = MIN_EXPECTED
) -> np.ndarray:
    """A group index per cell: cells expecting fewer than `min_expected` points (on the smaller
    side, by reference share) share one pooled group, grown until it expects enough itself."""
    expected = ref_counts / max(ref_counts.sum(), 1.0) * n_small_side
    order = np.argsort(expected, kind="stable")
    pooled = [int(j) for j in order if expected[j] < min_expected]
    rest = [int(j) for j in order if expected[j] >= min_expected]
    while pooled and expected[pooled].sum() < min_expected and rest:
        pooled.append(rest.pop(0))
    group = np.arange(len(ref_counts))
    if len(pooled) > 1:
        group[pooled] = pooled[0]
    _, dense = np.unique(group, return_inverse=True)
    return dense


def homogeneity_chi2(table: np.ndarray) -> tuple[float, int, float]:
    """Pearson chi-square of homogeneity for a 2 x K table: (statistic, dof, p-value)."""
    table = np.asarray(table, dtype=np.float64)
    table = table[:, table.sum(0) > 0]
    if table.shape[1] < 2:
        return 0.0, 0, 1.0
    expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / table.sum()
    stat = float(((table - expected) ** 2 / expected).sum())
    dof = table.shape[1] - 1
    return stat, dof, float(stats.chi2.sf(stat, dof))


def _cluster_mix_test(
    reference: np.ndarray,
    current: np.ndarray,
    *,
    threshold: float,
    rng: np.random.Generator,
    partition: Partition | None = None,
    min_samples: int = 50,
    min_expected: float = MIN_EXPECTED,
    effect_floor: float | None = None,
) -> TestResult:
    """Chi-square homogeneity, baseline (counted rows) vs window, of the cell occupancy and of
    the share outside every cell; p = 2 x the smaller p-value (Bonferroni)."""
    x = np.asarray(reference, dtype=np.float32)
    y = np.asarray(current, dtype=np.float32)
    if x.ndim != 2 or y.ndim != 2:
        return insufficient("cluster_mix", threshold, len(x), len(y), min_samples)
    x, y = x[np.isfinite(x).all(axis=1)], y[np.isfinite(y).all(axis=1)]
    if len(x) < 3 * min_samples or len(y) < min_samples:
        return insufficient("cluster_mix", threshold, len(x), len(y), min_samples)
    if y.shape[1] != x.shape[1]:
        raise ValueError(f"cluster_mix: current has dimension {y.shape[1]}, reference {x.shape[1]}")
    part = partition if partition is not None else partition_for(x)
    ref_counts = part.ref_counts if part.ref_counts is not None else part.counts(x[part.count_rows])
    cur_counts = part.counts(y)
    groups = pool_small_cells(ref_counts, int(min(ref_counts.sum(), len(y))), min_expected)
    table = np.vstack([np.bincount(groups, ref_counts), np.bincount(groups, cur_counts)])
    stat, dof, p_cells = homogeneity_chi2(table)
    outside = np.array(
        [[ref_counts[-1], ref_counts[:-1].sum()], [cur_counts[-1], cur_counts[:-1].sum()]]
    )
    stat_out, _, p_out = homogeneity_chi2(outside)
    p = min(1.0, 2.0 * min(p_cells, p_out))  # Bonferroni over the two views of one table
    ref_share, cur_share = ref_counts / ref_counts.sum(), cur_counts / cur_counts.sum()
    top = np.argsort(-(cur_share - ref_share), kind="stable")[:3]
    return TestResult(
        test="cluster_mix",
        statistic=stat,
        p_value=p,
        threshold=threshold,
        drifted=False,  # the spec's verdict decides (TestSpec.run)
        detail={
            "dof": dof,
            "p_raw": p,
            "p_cells": p_cells,
            "p_outside": p_out,
            "outside_statistic": stat_out,
            "cells": part.k,
            "groups": int(table.shape[1]),
            "baseline_outside_share": float(ref_share[-1]),
            "window_outside_share": float(cur_share[-1]),
            "n_reference": int(ref_counts.sum()),
            "n_current": int(cur_counts.sum()),
            "grown_cells": [
                {
                    "cell": "outside" if j == part.k else int(j),
                    "baseline_share": float(ref_share[j]),
                    "window_share": float(cur_share[j]),
                }
                for j in top
            ],
            "effect_floor": effect_floor,
        },
    )


SPEC = register(
    TestSpec(
        name="cluster_mix",
        kind="embedding",
        direction="p_value",
        default_threshold=0.001,
        min_samples=50,
        collect=prompt_mix_results,
        power_feature="prompt_embedding",  # its cells are fitted on the reference
        func=_cluster_mix_test,
        per_feature=False,  # prompt embeddings only: drift.detectors.prompt_response runs it
        description="chi-square homogeneity of occupancy of fine baseline k-means cells",
        display_name="the prompt-mix test",
        unit="chi-square statistic over prompt cells",
    )
)


def cluster_mix_test(reference: np.ndarray, current: np.ndarray, **kwargs: Any) -> TestResult:
    """The test with its spec's verdict (the registered function only measures)."""
    return SPEC.run(reference, current, **kwargs)
