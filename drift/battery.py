"""Every test between two feature sets: the unit the job (per segment), baseline validation
(first half vs second half) and calibration (chunk vs rest) all run.

Numeric features get PSI, KS and normalised Wasserstein (KS p-values Benjamini–Hochberg
adjusted across the features of this pair), eval scores also the eval trend; categoricals get
chi-square and Jensen–Shannon; embeddings get MMD and, with a cluster model, the new-cluster
and cluster-growth checks; prompt embeddings also the cluster-mix test, and responses the
prompt-conditioned MMD (drift.prompt_response). Results carry the feature name; the caller
sets the segment.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from drift.clusters import ClusterModel, cluster_results
from drift.eval_trend import eval_trend_test
from drift.features import FeatureSet
from drift.mmd import MMDReference
from drift.multitest import benjamini_hochberg
from drift.prompt_response import conditional_results, prompt_mix_results
from drift.registry import get_test
from drift.result import TestResult

NUMERIC_TESTS = ("psi", "ks", "wasserstein")
CATEGORICAL_TESTS = ("chi2", "js")


@dataclass
class Frozen:
    """What the baseline froze: PSI edges, Wasserstein scales, category levels, clusters."""

    psi_edges: dict[str, np.ndarray] = field(default_factory=dict)
    scales: dict[str, float] = field(default_factory=dict)
    levels: dict[str, list[str]] = field(default_factory=dict)
    clusters: dict[str, ClusterModel] = field(default_factory=dict)


@dataclass
class Levels:
    """Thresholds and effect floors by test then feature; missing entries use the spec default."""

    thresholds: dict[str, dict[str, float]] = field(default_factory=dict)
    effect_floors: dict[str, dict[str, float]] = field(default_factory=dict)
    min_samples: dict[str, int] = field(default_factory=dict)

    def threshold(self, test: str, feature: str) -> float:
        by_test = self.thresholds.get(test, {})
        return by_test.get(feature, by_test.get("*", get_test(test).default_threshold))

    def floor(self, test: str, feature: str) -> float | None:
        by_test = self.effect_floors.get(test, {})
        return by_test.get(feature, by_test.get("*"))

    def need(self, test: str) -> int:
        return self.min_samples.get(test, get_test(test).min_samples)


@dataclass
class BatteryOptions:
    mmd_permutations: int = 999
    mmd_max_samples: int = 2000
    eval_alpha: float = 0.01
    eval_drop: float = 0.05
    eval_window_days: float = 7.0
    eval_min_samples: int = 20
    cluster_min_samples: int = 50
    cluster_kwargs: dict[str, Any] = field(default_factory=dict)
    tests: tuple[str, ...] | None = None  # restrict to these test names (None: all)

    def wants(self, name: str) -> bool:
        return self.tests is None or name in self.tests


def _finite(x: np.ndarray) -> np.ndarray:
    return x[np.isfinite(x)]


def run_battery(
    ref: FeatureSet,
    cur: FeatureSet,
    *,
    frozen: Frozen,
    levels: Levels,
    rng: np.random.Generator,
    mmd_refs: dict[str, MMDReference] | None = None,
    options: BatteryOptions | None = None,
) -> list[TestResult]:
    opt = options or BatteryOptions()
    out: list[TestResult] = []
    ks_results: list[int] = []
    for name in ref.numeric:
        if name not in cur.numeric:
            continue
        r, c = ref.numeric[name], cur.numeric[name]
        for test in NUMERIC_TESTS:
            if not opt.wants(test):
                continue
            extra: dict[str, Any] = {"min_samples": levels.need(test)}
            if test == "psi":
                extra["edges"] = frozen.psi_edges.get(name)
            elif test == "wasserstein":
                extra["scale"] = frozen.scales.get(name)
            else:
                extra["effect_floor"] = levels.floor(test, name)
            res = get_test(test).run(r if test == "psi" else _finite(r),
                                     c if test == "psi" else _finite(c),
                                     threshold=levels.threshold(test, name), rng=rng, **extra)
            if test == "ks" and not res.insufficient:
                ks_results.append(len(out))
            out.append(res.with_context(feature=name))
        if name.startswith("eval_") and opt.wants("eval_trend"):
            res = eval_trend_test(r, c, threshold=opt.eval_drop, timestamps=cur.timestamps,
                                  alpha=opt.eval_alpha, window_days=opt.eval_window_days,
                                  min_samples=opt.eval_min_samples)
            out.append(res.with_context(feature=name))
    _adjust_ks(out, ks_results)

    for name in ref.categorical:
        if name not in cur.categorical:
            continue
        r, c = ref.categorical_values(name), cur.categorical_values(name)
        for test in CATEGORICAL_TESTS:
            if not opt.wants(test):
                continue
            extra = {"levels": frozen.levels.get(name), "min_samples": levels.need(test)}
            if test == "chi2":
                extra["effect_floor"] = levels.floor(test, name)
            res = get_test(test).run(r, c, threshold=levels.threshold(test, name), rng=rng, **extra)
            out.append(res.with_context(feature=name))

    for name, block in ref.embeddings.items():
        if name not in cur.embeddings:
            continue
        y = cur.embeddings[name].vectors
        if opt.wants("mmd"):
            res = get_test("mmd").run(
                block.vectors, y, threshold=levels.threshold("mmd", name), rng=rng,
                prepared=(mmd_refs or {}).get(name), n_permutations=opt.mmd_permutations,
                max_samples=opt.mmd_max_samples, min_samples=levels.need("mmd"),
                effect_floor=levels.floor("mmd", name))
            out.append(res.with_context(feature=name))
        if opt.wants("new_cluster") and name in frozen.clusters:
            for res in cluster_results(frozen.clusters[name], y, rng=rng,
                                       min_samples=opt.cluster_min_samples, **opt.cluster_kwargs):
                out.append(res.with_context(feature=name))
    out += prompt_mix_results(ref, cur, levels=levels, rng=rng, options=opt)
    out += conditional_results(ref, cur, frozen=frozen, levels=levels, rng=rng, options=opt)
    return out


def _adjust_ks(results: list[TestResult], positions: list[int]) -> None:
    """Replace the KS p-values of this family by their BH-adjusted values and re-decide."""
    if not positions:
        return
    adjusted = benjamini_hochberg([results[i].p_value for i in positions])
    for i, p_adj in zip(positions, adjusted, strict=True):
        r = results[i]
        floor = r.detail.get("effect_floor")
        big_enough = floor is None or r.statistic > floor
        results[i] = replace(r, p_value=float(p_adj), drifted=bool(p_adj <= r.threshold and big_enough),
                             detail={**r.detail, "p_bh": float(p_adj), "family_size": len(positions)})
