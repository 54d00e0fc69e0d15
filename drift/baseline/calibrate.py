"""Calibrate a baseline's thresholds from its own window-to-window noise.

The baseline (time-ordered) is cut into up to `max_chunks` contiguous chunks of the window size;
each chunk is tested against the rest with every test. Then, per test and feature:

- statistic tests (PSI, Wasserstein, JS: every registered test read by its statistic):
  threshold = max(canonical default, the `quantile` of the chunk statistics, their mean + k·sd)
  — never below the canonical value (PSI 0.25, ...);
- p-value tests (KS, chi-square, MMD): if chunks come out significant more often than α plus a
  3-sd binomial margin (the baseline's windows differ more than i.i.d. samples would), an
  effect floor = the `quantile` of the chunk statistics is added: a window must then be both
  significant and beyond the usual window-to-window spread. Otherwise α stays as it is.
  "Significant" here is at max(α, CAL_ALPHA): MMD's α = 0.001 is too rare an event to count in
  ten chunks, and calibration's MMD runs with 199 permutations (p resolution 0.005) for speed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

from drift.baseline.build import Baseline
from drift.battery import BatteryOptions, Levels, run_battery
from drift.registry import TestSpec, all_tests, get_test

MIN_CHUNK = 30
CAL_ALPHA = 0.01
CAL_PERMUTATIONS = 199


def chunk_bounds(n: int, window_size: int, max_chunks: int) -> list[tuple[int, int]]:
    """Non-overlapping contiguous chunks spread evenly over [0, n); at least 4 when possible."""
    size = min(window_size, n // 4)
    if size < MIN_CHUNK:
        return []
    count = min(max_chunks, n // size)
    stride = n // count
    return [(i * stride, i * stride + size) for i in range(count)]


def calibrate_baseline(
    baseline: Baseline,
    *,
    window_size: int,
    max_chunks: int = 10,
    costly_chunks: int = 5,
    quantile: float = 0.99,
    k_sd: float = 3.0,
    options: BatteryOptions | None = None,
) -> dict[str, Any]:
    """Set baseline.levels from chunk-vs-rest noise; returns (and keeps) a summary."""
    if window_size < 1:
        raise ValueError(f"window_size must be positive, got {window_size}")
    fs = baseline.features
    bounds = chunk_bounds(fs.n, window_size, max_chunks)
    summary: dict[str, Any] = {
        "window_size": int(window_size),
        "chunks": len(bounds),
        "chunk_size": bounds[0][1] - bounds[0][0] if bounds else 0,
        "quantile": quantile,
        "k_sd": k_sd,
        "tests": {},
    }
    if not bounds:
        summary["note"] = f"baseline of {fs.n} samples is too small to calibrate; defaults kept"
        baseline.calibration = summary
        return summary
    calibrated = [s for s in all_tests() if s.per_feature or s.calibrated]
    stats_by, pvals_by = _chunk_statistics(
        baseline, bounds, calibrated, options or BatteryOptions(), costly_chunks
    )
    for (test, feature), values in stats_by.items():
        entry = _set_level(
            baseline, get_test(test), feature, np.asarray(values), pvals_by, quantile, k_sd
        )
        summary["tests"][f"{test}:{feature}"] = entry
    baseline.calibration = summary
    return summary


def _chunk_statistics(
    baseline: Baseline,
    bounds: list[tuple[int, int]],
    calibrated: list[TestSpec],
    base: BatteryOptions,
    costly_chunks: int,
) -> tuple[dict[tuple[str, str], list[float]], dict[tuple[str, str], list[float]]]:
    """Each chunk against the rest: the statistics (and raw p-values) per test and feature."""
    fs = baseline.features
    stats_by: dict[tuple[str, str], list[float]] = defaultdict(list)
    pvals_by: dict[tuple[str, str], list[float]] = defaultdict(list)
    # p-value tests stricter than CAL_ALPHA (MMD's 0.001) run at CAL_ALPHA, so a permutation
    # test's count can stay at CAL_PERMUTATIONS
    plain = Levels(
        thresholds={
            s.name: {"*": CAL_ALPHA}
            for s in calibrated
            if s.direction == "p_value" and s.default_threshold < CAL_ALPHA
        },
        min_samples=baseline.levels.min_samples,
    )
    for i, (lo, hi) in enumerate(bounds):
        idx = np.arange(fs.n)
        inside = (idx >= lo) & (idx < hi)
        tests = tuple(s.name for s in calibrated if not s.costly or i < costly_chunks)
        opt = BatteryOptions(
            mmd_permutations=min(base.mmd_permutations, CAL_PERMUTATIONS),
            mmd_max_samples=base.mmd_max_samples,
            tests=tests,
        )
        rng = np.random.default_rng([baseline.seed, 3, i])
        results = run_battery(
            fs.take(idx[~inside]),
            fs.take(idx[inside]),
            frozen=baseline.frozen,
            levels=plain,
            rng=rng,
            options=opt,
        )
        for r in results:
            if r.insufficient or r.statistic is None:
                continue
            stats_by[(r.test, r.feature)].append(float(r.statistic))
            if get_test(r.test).direction == "p_value":
                p_raw = r.detail.get("p_raw", r.p_value)
                pvals_by[(r.test, r.feature)].append(float(1.0 if p_raw is None else p_raw))
    return stats_by, pvals_by


def _set_level(
    baseline: Baseline,
    spec: TestSpec,
    feature: str,
    v: np.ndarray,
    pvals_by: dict[tuple[str, str], list[float]],
    quantile: float,
    k_sd: float,
) -> dict[str, Any]:
    """A statistic test's threshold, or a p-value test's effect floor when its chunks came out
    significant too often; the summary entry of this test and feature."""
    test, default = spec.name, spec.default_threshold
    entry: dict[str, Any] = {
        "n": int(v.size),
        "mean": float(v.mean()),
        "sd": float(v.std()),
        "quantile": float(np.quantile(v, quantile)),
    }
    if spec.direction == "statistic":
        thr = max(default, entry["quantile"], entry["mean"] + k_sd * entry["sd"])
        baseline.levels.thresholds.setdefault(test, {})[feature] = float(thr)
        entry["threshold"] = float(thr)
        return entry
    p = np.asarray(pvals_by[(test, feature)])
    alpha = max(default, CAL_ALPHA)
    rate = float(np.mean(p <= alpha))
    margin = alpha + 3.0 * math.sqrt(alpha * (1 - alpha) / max(p.size, 1))
    entry.update(significant_rate=rate, expected_max=margin)
    if rate > margin and int(np.sum(p <= alpha)) >= 2:
        baseline.levels.effect_floors.setdefault(test, {})[feature] = entry["quantile"]
        entry["effect_floor"] = entry["quantile"]
    return entry
