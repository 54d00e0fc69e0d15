"""Chi-square and Jensen–Shannon tests for categorical features (finish reason, tool names),
and the new-value check for categoricals and segment keys (tenant, model_version, ...).

Levels are frozen with the baseline (`category_levels`): rare reference levels (< MIN_SHARE)
and levels never seen in the reference fold into OTHER, missing values into MISSING, so the
contingency table keeps usable expected counts and a brand-new level still shows as a shift.
The shift alone does not say *what* is new; `new_values_test` does: each value the reference
never had, with its share of the window ("new model_version m2: 100 % of the window").
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats
from scipy.spatial import distance

from drift.registry import TestSpec, register
from drift.result import TestResult, insufficient
from drift.weights import is_uniform

OTHER = "__other__"
MISSING = "__missing__"
MIN_SHARE = 0.01
MAX_LEVELS = 50
NOISE_QUANTILE = 0.999
NEW_VALUE_MIN_SHARE = 0.05  # a new value below this share of the window is noted, not drift
NEW_VALUE_MIN_COUNT = 10  # ... and so is one seen in fewer rows (a single stray request)
MAX_LISTED_VALUES = 20


def _clean(values: np.ndarray) -> np.ndarray:
    """Strings, with None/NaN as MISSING (vectorised: windows can hold a million values)."""
    series = pd.Series(np.asarray(values, dtype=object), dtype=object)
    return series.where(series.notna(), MISSING).astype(str).to_numpy(dtype=object)


def category_levels(reference: np.ndarray, min_share: float = MIN_SHARE) -> list[str]:
    """The reference's frequent levels (most frequent first), frozen with the baseline."""
    values, counts = np.unique(_clean(reference).astype(str), return_counts=True)
    order = np.argsort(-counts, kind="stable")
    total = max(counts.sum(), 1)
    return [str(values[i]) for i in order[:MAX_LEVELS] if counts[i] / total >= min_share]


def category_counts(values: np.ndarray, levels: list[str]) -> np.ndarray:
    """Counts per level, then OTHER (unseen or rare levels)."""
    codes = pd.Categorical(_clean(values), categories=levels).codes.astype(np.int64)
    codes[codes < 0] = len(levels)
    return np.bincount(codes, minlength=len(levels) + 1).astype(np.float64)


def _tables(reference, current, levels):
    levels = category_levels(reference) if levels is None else list(levels)
    rc, cc = category_counts(reference, levels), category_counts(current, levels)
    keep = (rc + cc) > 0  # a column empty on both sides carries no information
    return rc[keep], cc[keep], [*levels, OTHER]


def chi2_test(
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
    big_enough = effect_floor is None or stat > effect_floor
    return TestResult(
        test="chi2",
        statistic=stat,
        p_value=p,
        threshold=threshold,
        drifted=bool(p <= threshold and big_enough),
        detail={"dof": dof, "p_raw": p, "n_reference": n_ref, "n_current": n_cur,
                "effect_floor": effect_floor},
    )


def js_noise_level(n_ref: int, n_cur: int, n_levels: int, quantile: float = NOISE_QUANTILE) -> float:
    """Null quantile of the JS distance (base 2): JSD_nats ≈ (1/n + 1/m) · χ²(K-1) / 8."""
    chi = stats.chi2.ppf(quantile, max(n_levels - 1, 1))
    return float(math.sqrt(chi * (1.0 / n_ref + 1.0 / n_cur) / (8.0 * math.log(2.0))))


def js_test(
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
    value = 0.0 if rc.size < 2 else float(distance.jensenshannon(rc / rc.sum(), cc / cc.sum(), base=2))
    noise = js_noise_level(n_ref, n_cur, rc.size)
    applied = max(threshold, noise)
    return TestResult(
        test="js",
        statistic=value,
        p_value=None,
        threshold=applied,
        drifted=bool(value > applied),
        detail={"levels": int(rc.size), "noise_floor": noise,
                "n_reference": n_ref, "n_current": n_cur},
    )


def _present(values: np.ndarray) -> np.ndarray:
    """The non-missing values as strings (None/NaN dropped)."""
    cleaned = _clean(values)
    return cleaned[cleaned != MISSING]


def new_values_test(
    reference: np.ndarray,
    current: np.ndarray,
    *,
    weights: np.ndarray | None = None,
    min_share: float = NEW_VALUE_MIN_SHARE,
    min_count: int = NEW_VALUE_MIN_COUNT,
) -> TestResult:
    """Values of the window that the reference never had, by share of the window.

    statistic = the window's share (by `weights`, one per current row, when given) of rows with
    a new value; drifted when one new value holds >= `min_share` in >= `min_count` rows. The
    detail lists the new values (largest first; `big` marks those that drift) and the
    reference's common values the window lacks (`vanished`: chi2/js judge that shift, this only names it)."""
    cur_all = _clean(current)
    n_cur = int(cur_all.size)
    if n_cur == 0:
        return insufficient("new_category", min_share, len(reference), 0, 1)
    if weights is not None and is_uniform(np.asarray(weights, dtype=np.float64)):
        weights = None  # equal weights are the unweighted test, and say nothing else
    w = np.ones(n_cur) if weights is None else np.asarray(weights, dtype=np.float64)
    total = float(w.sum()) or 1.0
    ref_present = _present(reference)
    seen = set(np.unique(ref_present).tolist())
    values, inverse = np.unique(cur_all, return_inverse=True)
    counts = np.bincount(inverse, minlength=values.size)
    shares = np.bincount(inverse, weights=w, minlength=values.size) / total
    new = [i for i in np.argsort(-shares, kind="stable")
           if values[i] != MISSING and values[i] not in seen]
    listed = [{"value": str(values[i]), "count": int(counts[i]), "share": float(shares[i]),
               "big": bool(shares[i] >= min_share and counts[i] >= min_count)}
              for i in new[:MAX_LISTED_VALUES]]
    big = [v for v in listed if v["big"]]
    common = category_levels(ref_present) if ref_present.size else []
    vanished = [v for v in common if v not in set(values.tolist())]
    return TestResult(
        test="new_category",
        statistic=float(sum(shares[i] for i in new)),
        p_value=None,
        threshold=min_share,
        drifted=bool(big),
        detail={"new": listed, "n_new_values": len(new), "vanished": vanished[:MAX_LISTED_VALUES],
                "min_count": min_count, "n_reference": int(ref_present.size), "n_current": n_cur,
                **({"weighted": True} if weights is not None else {})},
    )


CHI2 = register(
    TestSpec(
        name="chi2",
        kind="categorical",
        direction="p_value",
        default_threshold=0.01,
        min_samples=30,
        func=chi2_test,
        description="chi-square test of homogeneity on frozen category levels",
    )
)
JS = register(
    TestSpec(
        name="js",
        kind="categorical",
        direction="statistic",
        default_threshold=0.1,
        min_samples=30,
        func=js_test,
        description="Jensen–Shannon distance (base 2) between category frequencies",
    )
)
