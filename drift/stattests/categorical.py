"""Chi-square and Jensen–Shannon tests for categorical features (finish reason, tool names),
over the category levels frozen with the baseline (drift.features.categories: rare and unseen levels
fold into OTHER, so a brand-new level still shows as a shift; drift.detectors.new_values names it).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats
from scipy.spatial import distance

from drift.features.categories import OTHER, category_counts, category_levels
from drift.result import TestResult, insufficient
from drift.spec import TestSpec, register

if TYPE_CHECKING:
    from drift.battery_inputs import TestInputs

NOISE_QUANTILE = 0.999


def _tables(
    reference: np.ndarray, current: np.ndarray, levels: list[str] | None
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    levels = category_levels(reference) if levels is None else list(levels)
    rc, cc = category_counts(reference, levels), category_counts(current, levels)
    keep = (rc + cc) > 0  # a column empty on both sides carries no information
    return rc[keep], cc[keep], [*levels, OTHER]


def _chi2_test(
    reference: np.ndarray,
    current: np.ndarray,
    *,
    threshold: float,
    rng: np.random.Generator,
    levels: list[str] | None = None,
    min_samples: int = 30,
    effect_floor: float | None = None,
) -> TestResult:
    n_ref, n_cur = len(reference), len(current)
    if n_ref < min_samples or n_cur < min_samples:
        return insufficient("chi2", threshold, n_ref, n_cur, min_samples)
    rc, cc, names = _tables(reference, current, levels)
    if rc.size < 2:  # one category on both sides: nothing can differ
        stat, p, dof = 0.0, 1.0, 0
    else:
        res = stats.chi2_contingency(np.vstack([rc, cc]), correction=False)
        stat, p, dof = float(res.statistic), float(res.pvalue), int(res.dof)
    return TestResult(
        test="chi2",
        statistic=stat,
        p_value=p,
        threshold=threshold,
        drifted=False,  # the spec's verdict decides (TestSpec.run)
        detail={
            "dof": dof,
            "p_raw": p,
            "n_reference": n_ref,
            "n_current": n_cur,
            "effect_floor": effect_floor,
        },
    )


def js_noise_level(
    n_ref: int, n_cur: int, n_levels: int, quantile: float = NOISE_QUANTILE
) -> float:
    """Null quantile of the JS distance (base 2): JSD_nats ≈ (1/n + 1/m) · χ²(K-1) / 8."""
    chi = stats.chi2.ppf(quantile, max(n_levels - 1, 1))
    return float(math.sqrt(chi * (1.0 / n_ref + 1.0 / n_cur) / (8.0 * math.log(2.0))))


def _js_test(
    reference: np.ndarray,
    current: np.ndarray,
    *,
    threshold: float,
    rng: np.random.Generator,
    levels: list[str] | None = None,
    min_samples: int = 30,
) -> TestResult:
    n_ref, n_cur = len(reference), len(current)
    if n_ref < min_samples or n_cur < min_samples:
        return insufficient("js", threshold, n_ref, n_cur, min_samples)
    rc, cc, names = _tables(reference, current, levels)
    value = (
        0.0 if rc.size < 2 else float(distance.jensenshannon(rc / rc.sum(), cc / cc.sum(), base=2))
    )
    noise = js_noise_level(n_ref, n_cur, rc.size)
    applied = max(threshold, noise)
    return TestResult(
        test="js",
        statistic=value,
        p_value=None,
        threshold=applied,
        drifted=False,  # the spec's verdict decides (TestSpec.run)
        detail={
            "levels": int(rc.size),
            "noise_floor": noise,
            "n_reference": n_ref,
            "n_current": n_cur,
        },
    )


def frozen_args(inputs: TestInputs, feature: str) -> dict[str, Any]:
    return {"levels": inputs.frozen.levels.get(feature)}


CHI2 = register(
    TestSpec(
        name="chi2",
        kind="categorical",
        direction="p_value",
        default_threshold=0.01,
        min_samples=30,
        func=_chi2_test,
        args=frozen_args,
        description="chi-square test of homogeneity on frozen category levels",
        display_name="the chi-square test",
        unit="chi-square statistic",
        validation_threshold=0.001,
    )
)
JS = register(
    TestSpec(
        name="js",
        kind="categorical",
        direction="statistic",
        default_threshold=0.1,
        min_samples=30,
        func=_js_test,
        args=frozen_args,
        description="Jensen–Shannon distance (base 2) between category frequencies",
        display_name="the Jensen–Shannon distance",
        unit="Jensen–Shannon distance (0 to 1)",
        validation_threshold=0.1,
    )
)


def chi2_test(reference: np.ndarray, current: np.ndarray, **kwargs: Any) -> TestResult:
    """The test with its spec's verdict (the registered function only measures)."""
    return CHI2.run(reference, current, **kwargs)


def js_test(reference: np.ndarray, current: np.ndarray, **kwargs: Any) -> TestResult:
    """The test with its spec's verdict (the registered function only measures)."""
    return JS.run(reference, current, **kwargs)
