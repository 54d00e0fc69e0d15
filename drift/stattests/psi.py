"""Population Stability Index over bins frozen from the reference's quantiles.

Bins: inner edges at reference quantiles (duplicates dropped, so discrete features get fewer
bins), open outer bins (-inf, e1] and (ek, +inf) so current values outside the reference range
still land somewhere, plus a missing-value bin (NaN) when either side has missing values.
Empty bins are smoothed to EPSILON (then renormalised) so the log ratio stays finite.

PSI = Σ (q - p) · ln(q / p). A small window's PSI is noisy, so the applied threshold is never
below the 0.999 quantile of PSI between two samples of these sizes drawn from the reference's
bin proportions — small segments don't false-alarm. Below 500 samples that quantile is
simulated (10,000 draws, fixed seed, cached): the χ²(B-1)·(1/n + 1/m) approximation (PSI ≈ the χ²
divergence) holds from ~200 samples but is 2x too low at 60, where empty bins hit the ε floor.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats

from drift.result import TestResult, insufficient
from drift.spec import TestSpec, register

if TYPE_CHECKING:
    from drift.battery_inputs import TestInputs

EPSILON = 1e-4
DEFAULT_BINS = 10
NOISE_QUANTILE = 0.999
SIMULATE_BELOW = 500
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


def psi_noise_level(
    ref_counts: np.ndarray, n_cur: int, quantile: float = NOISE_QUANTILE, draws: int = 10_000
) -> float:
    """The `quantile` of PSI between the reference and a same-distribution window of n_cur."""
    n_ref = int(ref_counts.sum())
    asymptotic = stats.chi2.ppf(quantile, max(len(ref_counts) - 1, 1)) * (1.0 / n_ref + 1.0 / n_cur)
    if min(n_ref, n_cur) > SIMULATE_BELOW:  # the χ² approximation is accurate here
        return float(asymptotic)
    key = tuple(int(c) for c in ref_counts)
    return max(float(asymptotic), _simulated(key, int(n_cur), quantile, draws))


@lru_cache(maxsize=4096)
def _simulated(ref_counts: tuple, n_cur: int, quantile: float, draws: int) -> float:
    """Null PSI by simulation. With bins cut at the reference's own quantiles, the true bin
    probabilities given the reference counts k are Dirichlet(k) (uniform spacings); a window is
    then Multinomial(n_cur, π). Fixed seed: the same sizes always give the same floor."""
    rng = np.random.default_rng(12345)
    k = np.asarray(ref_counts, dtype=np.float64)
    g = rng.gamma(np.maximum(k, 0.5), size=(draws, k.size))
    pi = g / g.sum(1, keepdims=True)
    # Poisson counts normalised by their total are exactly multinomial given that total (which
    # wanders by ~sqrt(n)): ~10x cheaper than drawing the multinomial itself
    counts = rng.poisson(pi * n_cur).astype(np.float64)
    totals = np.maximum(counts.sum(1, keepdims=True), 1.0)
    p = smoothed(k)[None, :]
    q = np.maximum(counts / totals, EPSILON)
    q /= q.sum(1, keepdims=True)
    return float(np.quantile(np.sum((q - p) * np.log(q / p), axis=1), quantile))


def _psi_test(
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
    noise = psi_noise_level(rc, cur.size)
    applied = max(threshold, noise)
    scale = 1.0 / ref.size + 1.0 / cur.size
    return TestResult(
        test="psi",
        statistic=value,
        p_value=None,
        threshold=applied,
        drifted=False,  # the spec's verdict decides (TestSpec.run)
        detail={
            "bins": n_bins,
            "level": "major" if value > 0.25 else "minor" if value > MINOR else "none",
            "noise_floor": noise,
            "approx_p": float(stats.chi2.sf(value / scale, max(n_bins - 1, 1))),
            "n_reference": int(ref.size),
            "n_current": int(cur.size),
        },
    )


def frozen_args(inputs: TestInputs, feature: str) -> dict[str, Any]:
    return {"edges": inputs.frozen.psi_edges.get(feature)}


SPEC = register(
    TestSpec(
        name="psi",
        kind="numeric",
        direction="statistic",
        default_threshold=0.25,
        min_samples=50,
        func=_psi_test,
        args=frozen_args,
        description="Population Stability Index on reference-quantile bins",
        display_name="PSI",
        unit="PSI",
        validation_threshold=0.1,
    )
)


def psi_test(reference: np.ndarray, current: np.ndarray, **kwargs: Any) -> TestResult:
    """The test with its spec's verdict (the registered function only measures)."""
    return SPEC.run(reference, current, **kwargs)
