"""Segments of a window: one label "key=value" per value of a segment key (tenant, segment,
prompt version, ...), and the rows each label selects on either side of a comparison."""

from __future__ import annotations

import numpy as np

from drift.features.feature_set import FeatureSet

DEFAULT_SEGMENT_BY = ("tenant", "segment", "prompt_version")
MIN_SEGMENT_SIZE = 50
MAX_SEGMENTS_PER_KEY = 50


def segment_rows(fs: FeatureSet, key: str, value: str) -> np.ndarray:
    return np.flatnonzero(fs.keys[key] == value) if key in fs.keys else np.empty(0, np.int64)


def segment_values(fs: FeatureSet, key: str, limit: int) -> list[str]:
    """Values of `key` in the window, most frequent first (at most `limit`)."""
    if key not in fs.keys:
        return []
    vals = [v for v in fs.keys[key] if v is not None]
    if not vals:
        return []
    uniq, counts = np.unique(np.asarray(vals, dtype=str), return_counts=True)
    order = np.argsort(-counts, kind="stable")
    return [str(uniq[i]) for i in order[:limit]]
