"""Percentiles per time bucket in one vectorised pass, where the database cannot compute them
(SQLite has no percentile aggregate). Same definition as `numpy.percentile(..., method="linear")`
and PostgreSQL's `percentile_cont`: the value at rank q·(n-1), interpolated between neighbours."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def bucket_quantiles(
    idx: np.ndarray, values: np.ndarray, n: int, qs: Sequence[float]
) -> np.ndarray:
    """(len(qs), n) array: for bucket b in 0..n-1 the q-quantiles (q in [0, 1]) of the finite
    values whose idx is b; NaN where a bucket has none. Rows with idx outside 0..n-1 are ignored."""
    out = np.full((len(qs), n), np.nan)
    idx = np.asarray(idx, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    keep = np.isfinite(values) & (idx >= 0) & (idx < n)
    if not keep.any():
        return out
    idx, values = idx[keep], values[keep]
    order = np.lexsort((values, idx))  # by bucket, then by value
    ordered = values[order]
    counts = np.bincount(idx, minlength=n)
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    filled = counts > 0
    for row, q in enumerate(qs):
        rank = q * (counts[filled] - 1)
        below = np.floor(rank).astype(np.int64)
        above = np.minimum(below + 1, counts[filled] - 1)
        low, high = ordered[first[filled] + below], ordered[first[filled] + above]
        out[row, filled] = low + (high - low) * (rank - below)
    return out
