"""What is new in a window: each categorical or key value the reference never had.

The chi-square / Jensen–Shannon shift alone does not say *what* is new; this does, with each
value's share of the window ("new model_version m2: 100 % of the window"). A value below
NEW_VALUE_MIN_SHARE of the window, or seen in fewer than NEW_VALUE_MIN_COUNT rows (a stray
request), is listed but is not drift.
"""

from __future__ import annotations

import numpy as np

from drift.features.categories import MISSING, category_levels, clean_values, present_values
from drift.features.weights import is_uniform
from drift.result import TestResult, insufficient

NEW_VALUE_MIN_SHARE = 0.05
NEW_VALUE_MIN_COUNT = 10
MAX_LISTED_VALUES = 20


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
    reference's common values the window lacks (`vanished`: chi2/js judge that shift, this
    only names it)."""
    cur_all = clean_values(current)
    n_cur = int(cur_all.size)
    if n_cur == 0:
        return insufficient("new_category", min_share, len(reference), 0, 1)
    if weights is not None and is_uniform(np.asarray(weights, dtype=np.float64)):
        weights = None  # equal weights are the unweighted test, and say nothing else
    w = np.ones(n_cur) if weights is None else np.asarray(weights, dtype=np.float64)
    total = float(w.sum()) or 1.0
    ref_present = present_values(reference)
    seen = set(np.unique(ref_present).tolist())
    values, inverse = np.unique(cur_all, return_inverse=True)
    counts = np.bincount(inverse, minlength=values.size)
    shares = np.bincount(inverse, weights=w, minlength=values.size) / total
    new = [
        i
        for i in np.argsort(-shares, kind="stable")
        if values[i] != MISSING and values[i] not in seen
    ]
    listed = [
        {
            "value": str(values[i]),
            "count": int(counts[i]),
            "share": float(shares[i]),
            "big": bool(shares[i] >= min_share and counts[i] >= min_count),
        }
        for i in new[:MAX_LISTED_VALUES]
    ]
    big = [v for v in listed if v["big"]]
    common = category_levels(ref_present) if ref_present.size else []
    vanished = [v for v in common if v not in set(values.tolist())]
    return TestResult(
        test="new_category",
        statistic=float(sum(shares[i] for i in new)),
        p_value=None,
        threshold=min_share,
        drifted=bool(big),
        detail={
            "new": listed,
            "n_new_values": len(new),
            "vanished": vanished[:MAX_LISTED_VALUES],
            "min_count": min_count,
            "n_reference": int(ref_present.size),
            "n_current": n_cur,
            **({"weighted": True} if weights is not None else {}),
        },
    )
