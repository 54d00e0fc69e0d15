"""Wasserstein-1 distance normalised by the reference's standard deviation.

Unitless, so one threshold fits latency in ms and logprobs alike (0.1 = a tenth of a standard
deviation of earth moved). Its null noise: sqrt(nm/(n+m)) · W1 → ∫|B(F(x))|dx (B a Brownian
bridge), whose scale is J = ∫ sqrt(F(1-F)) dx, computed from the reference. The applied
threshold is never below NOISE_COEF · J / scale · sqrt(1/n + 1/m): measured at n = m = 100,
that is above the 0.999 null quantile for normal and exponential data (2.4 J, 2.6 J); heavy
tails exceed it at small n (lognormal σ=1: 0.999 quantile ≈ 4 J), so for latency-like features
small segments lean on PSI, whose floor is exact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from drift.result import TestResult, insufficient
from drift.spec import TestSpec, register

if TYPE_CHECKING:
    from drift.battery_inputs import TestInputs

NOISE_COEF = 2.7


def reference_scale(reference: np.ndarray) -> float:
    """The normaliser: the reference's std, or 1 when it is constant (then W1 is in raw units)."""
    x = np.asarray(reference, dtype=np.float64)
    x = x[np.isfinite(x)]
    sd = float(np.std(x)) if x.size else 0.0
    return sd if sd > 0 else 1.0


def spread(reference: np.ndarray, *, is_sorted: bool = False) -> float:
    """J = ∫ sqrt(F(1-F)) dx over the reference's empirical CDF."""
    x = reference if is_sorted else np.sort(reference)
    f = np.arange(1, x.size) / x.size
    return float(np.sum(np.sqrt(f * (1 - f)) * np.diff(x)))


def w1_distance(u_sorted: np.ndarray, v_sorted: np.ndarray) -> float:
    """W1 = ∫|F - G| dx between two sorted samples (scipy.stats.wasserstein_distance's value).

    A stable argsort of the two concatenated sorted runs is a linear merge, and the running
    count of reference points along it is F at every pooled point, so no pooled sort and no
    searchsorted are needed: ~5x faster than scipy on 1M vs 100k values. Ties are exact: a
    zero-width step between equal values adds nothing."""
    both = np.concatenate([u_sorted, v_sorted])
    order = np.argsort(both, kind="stable")
    from_u = order < u_sorted.size
    f = np.cumsum(from_u)[:-1] / u_sorted.size
    g = np.cumsum(~from_u)[:-1] / v_sorted.size
    return float(np.sum(np.abs(f - g) * np.diff(both[order])))


def _wasserstein_test(
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
    ref = np.sort(ref)
    value = w1_distance(ref, np.sort(cur)) / scale
    noise = (
        NOISE_COEF
        * spread(ref, is_sorted=True)
        / scale
        * float(np.sqrt(1.0 / ref.size + 1.0 / cur.size))
    )
    applied = max(threshold, noise)
    return TestResult(
        test="wasserstein",
        statistic=value,
        p_value=None,
        threshold=applied,
        drifted=False,  # the spec's verdict decides (TestSpec.run)
        detail={
            "scale": scale,
            "noise_floor": noise,
            "n_reference": int(ref.size),
            "n_current": int(cur.size),
        },
    )


def frozen_args(inputs: TestInputs, feature: str) -> dict[str, Any]:
    return {"scale": inputs.frozen.scales.get(feature)}


SPEC = register(
    TestSpec(
        name="wasserstein",
        kind="numeric",
        direction="statistic",
        default_threshold=0.1,
        min_samples=30,
        func=_wasserstein_test,
        args=frozen_args,
        description="Wasserstein-1 distance / reference standard deviation",
        display_name="the Wasserstein distance",
        unit="reference standard deviations",
        validation_threshold=0.1,
    )
)


def wasserstein_test(reference: np.ndarray, current: np.ndarray, **kwargs: Any) -> TestResult:
    """The test with its spec's verdict (the registered function only measures)."""
    return SPEC.run(reference, current, **kwargs)
