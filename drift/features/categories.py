"""Category levels frozen with the baseline, and counts over them.

Rare reference levels (< MIN_SHARE) and levels never seen in the reference fold into OTHER,
missing values into MISSING, so a contingency table keeps usable expected counts and a
brand-new level still shows as a shift. Used by the chi-square and Jensen–Shannon tests
(drift.stattests.categorical), the baseline (which freezes the levels) and the new-value check
(drift.detectors.new_values).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

OTHER = "__other__"
MISSING = "__missing__"
MIN_SHARE = 0.01
MAX_LEVELS = 50


def clean_values(values: np.ndarray) -> np.ndarray:
    """Strings, with None/NaN as MISSING (vectorised: windows can hold a million values)."""
    series = pd.Series(np.asarray(values, dtype=object), dtype=object)
    return series.where(series.notna(), MISSING).astype(str).to_numpy(dtype=object)


def category_levels(reference: np.ndarray, min_share: float = MIN_SHARE) -> list[str]:
    """The reference's frequent levels (most frequent first), frozen with the baseline."""
    values, counts = np.unique(clean_values(reference).astype(str), return_counts=True)
    order = np.argsort(-counts, kind="stable")
    total = max(counts.sum(), 1)
    return [str(values[i]) for i in order[:MAX_LEVELS] if counts[i] / total >= min_share]


def category_counts(values: np.ndarray, levels: list[str]) -> np.ndarray:
    """Counts per level, then OTHER (unseen or rare levels)."""
    codes = pd.Categorical(clean_values(values), categories=levels).codes.astype(np.int64)
    codes[codes < 0] = len(levels)
    return np.bincount(codes, minlength=len(levels) + 1).astype(np.float64)


def present_values(values: np.ndarray) -> np.ndarray:
    """The non-missing values as strings (None/NaN dropped)."""
    cleaned = clean_values(values)
    return cleaned[cleaned != MISSING]
