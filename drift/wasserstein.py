"""Wasserstein-1 distance normalised by the reference's standard deviation.

Unitless, so one threshold fits latency in ms and logprobs alike (0.1 = a tenth of a standard
deviation of earth moved). Its null noise shrinks like sqrt(1/n + 1/m); the applied threshold
is never below NOISE_COEF · sqrt(1/n + 1/m), about the 0.999 null quantile for a normal
reference (checked by the null-rate test in tests/drift).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from drift.registry import TestSpec, register
from drift.result import TestResult, insufficient

NOISE_COEF = 3.5


def reference_scale(reference: np.ndarray) -> float:
    """The normaliser: the reference's std, or 1 when it is constant (then W1 is in raw units)."""
    x = np.asarray(reference, dtype=np.float64)
    x = x[np.isfinite(x)]
    sd = float(np.std(x)) if x.size else 0.0
    return sd if sd > 0 else 1.0


def wasserstein_test(
    reference: np.ndarray,
    current: np.ndarray,
    *,
    threshold: float,
    rng: np.random.Generator,
    scale: float | None = None,
    min_samples: int = 30,
) -> TestResult:
    ref = np.asarray(reference, dtype=np.float64)
    cur = np.asarray(current, dtype=np.float64)
    ref, cur = ref[np.isfinite(ref)], cur[np.isfinite(cur)]
    if ref.size < min_samples or cur.size < min_samples:
        return insufficient("wasserstein", threshold, ref.size, cur.size, min_samples)
    scale = reference_scale(ref) if scale is None else float(scale)
    value = float(stats.wasserstein_distance(ref, cur)) / scale
    noise = NOISE_COEF * float(np.sqrt(1.0 / ref.size + 1.0 / cur.size))
    applied = max(threshold, noise)
    return TestResult(
        test="wasserstein",
        statistic=value,
        p_value=None,
        threshold=applied,
        drifted=bool(value > applied),
        detail={"scale": scale, "noise_floor": noise,
                "n_reference": int(ref.size), "n_current": int(cur.size)},
    )


SPEC = register(
    TestSpec(
        name="wasserstein",
        kind="numeric",
        direction="statistic",
        default_threshold=0.1,
        min_samples=30,
        func=wasserstein_test,
        description="Wasserstein-1 distance / reference standard deviation",
    )
)
