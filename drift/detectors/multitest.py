"""Benjamini–Hochberg adjustment across a family of tests (features of one segment)."""

from __future__ import annotations

import numpy as np


def benjamini_hochberg(p_values: np.ndarray | list[float]) -> np.ndarray:
    """BH-adjusted p-values (step-up, monotone, capped at 1); same order as the input."""
    p = np.asarray(p_values, dtype=np.float64)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p)
    ranked = p[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(adjusted, 1.0)
    return out
