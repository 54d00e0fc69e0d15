"""Eval-score trend: the trailing 7-day mean of each eval score against the baseline's mean.

A relative drop larger than `threshold` (default 5 %) that is also significant — one-sided
Welch t-test, p ≤ alpha — is drift (the job makes it a critical alert). A large but noisy drop
is not enough, and neither is a significant but tiny one. Mann–Whitney's p is reported beside
Welch's as a check that a few outliers don't carry the mean.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from drift.result import TestResult, insufficient

DAY = 86_400.0


def trailing_window(values: np.ndarray, timestamps: np.ndarray | None, days: float) -> np.ndarray:
    """The values of the last `days` days (ending at the newest timestamp); all if no times."""
    v = np.asarray(values, dtype=np.float64)
    if timestamps is None or not np.isfinite(timestamps).any():
        return v
    ts = np.asarray(timestamps, dtype=np.float64)
    end = np.nanmax(ts)
    return v[(ts > end - days * DAY) | np.isnan(ts)]


def daily_means(values: np.ndarray, timestamps: np.ndarray | None, days: int) -> list[float | None]:
    """Mean per day over the trailing `days` days, oldest first (None for an empty day)."""
    if timestamps is None or not np.isfinite(timestamps).any():
        return []
    ts = np.asarray(timestamps, dtype=np.float64)
    end = np.nanmax(ts)
    out = []
    for d in range(days - 1, -1, -1):
        sel = (ts > end - (d + 1) * DAY) & (ts <= end - d * DAY) & np.isfinite(values)
        out.append(float(np.mean(values[sel])) if sel.any() else None)
    return out


def eval_trend_test(
    reference: np.ndarray,
    current: np.ndarray,
    *,
    threshold: float = 0.05,
    rng: np.random.Generator | None = None,
    timestamps: np.ndarray | None = None,
    alpha: float = 0.01,
    window_days: float = 7.0,
    min_samples: int = 20,
) -> TestResult:
    ref = np.asarray(reference, dtype=np.float64)
    cur_all = np.asarray(current, dtype=np.float64)
    ts = None if timestamps is None else np.asarray(timestamps, dtype=np.float64)
    cur = trailing_window(cur_all, ts, window_days)
    ref, cur = ref[np.isfinite(ref)], cur[np.isfinite(cur)]
    if ref.size < min_samples or cur.size < min_samples:
        return insufficient("eval_trend", threshold, ref.size, cur.size, min_samples)
    base_mean, cur_mean = float(ref.mean()), float(cur.mean())
    drop = (
        (base_mean - cur_mean) / abs(base_mean) if base_mean != 0 else float(base_mean > cur_mean)
    )
    if np.std(ref) == 0 and np.std(cur) == 0:
        welch_p = 0.0 if cur_mean < base_mean else 1.0
    else:
        welch_p = float(stats.ttest_ind(ref, cur, equal_var=False, alternative="greater").pvalue)
    mwu_p = float(stats.mannwhitneyu(ref, cur, alternative="greater").pvalue)
    return TestResult(
        test="eval_trend",
        statistic=float(drop),
        p_value=welch_p,
        threshold=threshold,
        drifted=bool(drop > threshold and welch_p <= alpha),
        detail={
            "baseline_mean": base_mean,
            "window_mean": cur_mean,
            "relative_drop": float(drop),
            "alpha": alpha,
            "mann_whitney_p": mwu_p,
            "window_days": window_days,
            "daily_means": daily_means(cur_all, ts, int(min(window_days, 30))),
            "n_reference": int(ref.size),
            "n_current": int(cur.size),
        },
    )
