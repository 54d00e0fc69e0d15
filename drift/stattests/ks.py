"""Two-sample Kolmogorov–Smirnov test (scipy), one feature at a time.

Across features the job adjusts the p-values with Benjamini–Hochberg (drift.detectors.multitest), so
ten features at α do not give ten chances to false-alarm.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from drift.result import TestResult, insufficient
from drift.spec import TestSpec, register


def _ks_test(
    reference: np.ndarray,
    current: np.ndarray,
    *,
    threshold: float,
    rng: np.random.Generator,
    min_samples: int = 20,
    effect_floor: float | None = None,
) -> TestResult:
    ref = np.asarray(reference, dtype=np.float64)
    cur = np.asarray(current, dtype=np.float64)
    ref, cur = ref[np.isfinite(ref)], cur[np.isfinite(cur)]
    if ref.size < min_samples or cur.size < min_samples:
        return insufficient("ks", threshold, ref.size, cur.size, min_samples)
    res = stats.ks_2samp(ref, cur)
    stat, p = float(res.statistic), float(res.pvalue)
    return TestResult(
        test="ks",
        statistic=stat,
        p_value=p,
        threshold=threshold,
        drifted=False,  # the spec's verdict decides (TestSpec.run)
        detail={
            "n_reference": int(ref.size),
            "n_current": int(cur.size),
            "p_raw": p,
            "effect_floor": effect_floor,
        },
    )


SPEC = register(
    TestSpec(
        name="ks",
        kind="numeric",
        direction="p_value",
        default_threshold=0.01,
        min_samples=20,
        func=_ks_test,
        adjusted_across_features=True,
        description="two-sample Kolmogorov–Smirnov (scipy), Benjamini–Hochberg across features",
        display_name="the KS test",
        unit="largest gap of the two CDFs (D)",
        validation_threshold=0.001,
        validation_floor=0.05,
    )
)


def ks_test(reference: np.ndarray, current: np.ndarray, **kwargs: Any) -> TestResult:
    """The test with its spec's verdict (the registered function only measures)."""
    return SPEC.run(reference, current, **kwargs)
