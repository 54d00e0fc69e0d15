"""Population Stability Index over bins frozen from the reference's quantiles.

Bins: inner edges at reference quantiles (duplicates dropped, so discrete features get fewer
bins), open outer bins (-inf, e1] and (ek, +inf) so current values outside the reference range
still land somewhere, plus a missing-value bin (NaN) when either side has missing values.
Empty bins are smoothed to EPSILON (then renormalised) so the log ratio stays finite.

PSI = Σ (q - p) · ln(q / p). Under "no drift", PSI · nm/(n+m) is ≈ χ²(B-1) (PSI is ≈ the
χ² divergence for small differences), so a small window's PSI is noisy: the applied threshold
is never below that null distribution's 0.999 quantile — small segments don't false-alarm.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from drift.registry import TestSpec, register
from drift.result import TestResult, insufficient

EPSILON = 1e-4
DEFAULT_BINS = 10
NOISE_QUANTILE = 0.999
MINOR = 0.1  # the canonical "some shift" level; 0.25 (the default threshold) is "major"


def psi_edges(reference: np.ndarray, bins: int = DEFAULT_BINS) -> np.ndarray:
    """Inner bin edges at the reference's quantiles; frozen with the baseline."""
    x = np.asarray(reference, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return np.empty(0)
    qs = np.quantile(x, np.linspace(0.0, 1.0, bins + 1)[1:-1])
    return np.unique(qs)


def bin_counts(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Counts per bin: len(edges)+1 right-closed value bins, then the missing-value bin."""
    x = np.asarray(values, dtype=np.float64)
    missing = np.isnan(x)
    idx = np.searchsorted(edges, x[~missing], side="left")
    counts = np.bincount(idx, minlength=len(edges) + 1).astype(np.float64)
    return np.append(counts, float(missing.sum()))


def smoothed(counts: np.ndarray) -> np.ndarray:
    p = counts / max(counts.sum(), 1.0)
    p = np.maximum(p, EPSILON)
    return p / p.sum()


def psi_from_counts(ref_counts: np.ndarray, cur_counts: np.ndarray) -> float:
    p, q = smoothed(ref_counts), smoothed(cur_counts)
    return float(np.sum((q - p) * np.log(q / p)))


def psi_noise_level(n_ref: int, n_cur: int, n_bins: int, quantile: float = NOISE_QUANTILE) -> float:
    """The `quantile` of PSI between two same-distribution samples of these sizes."""
    return float(stats.chi2.ppf(quantile, max(n_bins - 1, 1)) * (1.0 / n_ref + 1.0 / n_cur))


def psi_test(
    reference: np.ndarray,
    current: np.ndarray,
    *,
    threshold: float,
    rng: np.random.Generator,
    edges: np.ndarray | None = None,
    min_samples: int = 50,
) -> TestResult:
    ref = np.asarray(reference, dtype=np.float64)
    cur = np.asarray(current, dtype=np.float64)
    if ref.size < min_samples or cur.size < min_samples:
        return insufficient("psi", threshold, ref.size, cur.size, min_samples)
    edges = psi_edges(ref) if edges is None else np.asarray(edges, dtype=np.float64)
    rc, cc = bin_counts(ref, edges), bin_counts(cur, edges)
    if rc[-1] == 0 and cc[-1] == 0:  # no missing values on either side: no missing bin
        rc, cc = rc[:-1], cc[:-1]
    value = psi_from_counts(rc, cc)
    n_bins = len(rc)
    noise = psi_noise_level(ref.size, cur.size, n_bins)
    applied = max(threshold, noise)
    scale = 1.0 / ref.size + 1.0 / cur.size
    return TestResult(
        test="psi",
        statistic=value,
        p_value=None,
        threshold=applied,
        drifted=bool(value > applied),
        detail={
            "bins": n_bins,
            "level": "major" if value > 0.25 else "minor" if value > MINOR else "none",
            "noise_floor": noise,
            "approx_p": float(stats.chi2.sf(value / scale, max(n_bins - 1, 1))),
            "n_reference": int(ref.size),
            "n_current": int(cur.size),
        },
    )


SPEC = register(
    TestSpec(
        name="psi",
        kind="numeric",
        direction="statistic",
        default_threshold=0.25,
        min_samples=50,
        func=psi_test,
        description="Population Stability Index on reference-quantile bins",
    )
)
