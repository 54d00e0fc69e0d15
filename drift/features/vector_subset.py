"""Rows with vectors as a sample of their segment: the keep weights that restore the window's mix.

A capped window's embedding tests read the vectors of a nested stratified subset of its rows
(per segment the first rows by draw: a uniform sample of each segment, at a rate that differs
by segment because every segment keeps a floor). The whole-window thinning (drift.features.weights)
keeps row i with probability w_i / max w, which gives the window's rows the population mix;
the rows with vectors, a share e_s of their segment s, would come out with each segment's
share scaled by e_s. Thinning them once more with probability proportional to
r_s = (weight of the segment's rows that could have a vector) / (weight of those that have one)
makes each vector row's overall inclusion proportional to w_i * r_s, its weight as a member of
the subset: the population mix again. Rows that could have a vector are those with the field's
text (or a vector). When r_s is one number for every segment (every row embedded, or the same
share everywhere) there is nothing to correct, and nothing is thinned.
"""

from __future__ import annotations

import numpy as np

from drift.features.feature_set import FeatureSet

STRATUM = "segment"  # the stratum of the traffic sampler and of the window cap
TEXT_LENGTH = {"prompt_embedding": "prompt_chars", "response_embedding": "response_chars"}


def _stratum_codes(fs: FeatureSet) -> np.ndarray:
    labels = fs.keys.get(STRATUM)
    if labels is None:
        return np.zeros(fs.n, np.int64)
    named = np.asarray(["" if v is None else f"={v}" for v in labels], dtype=object)
    return np.unique(named.astype(str), return_inverse=True)[1].astype(np.int64).reshape(-1)


def vector_keep_weights(fs: FeatureSet) -> dict[str, np.ndarray]:
    """Per embedding block whose segments hold vectors at different rates: r_s of each of its
    rows' segment, in the block's row order ({} when no block needs it)."""
    if fs.n == 0:
        return {}
    codes = _stratum_codes(fs)
    weights = np.ones(fs.n) if fs.weights is None else np.asarray(fs.weights, dtype=np.float64)
    out: dict[str, np.ndarray] = {}
    for name, block in fs.embeddings.items():
        if not len(block.rows):
            continue
        length = fs.numeric.get(TEXT_LENGTH.get(name, ""))
        could = np.ones(fs.n, bool) if length is None else np.isfinite(length)
        could[block.rows] = True
        size = int(codes.max()) + 1
        total = np.bincount(codes[could], weights[could], minlength=size)
        with_vectors = np.bincount(codes[block.rows], weights[block.rows], minlength=size)
        ratio = total[codes[block.rows]] / with_vectors[codes[block.rows]]
        if not np.allclose(ratio, ratio[0], rtol=1e-9, atol=0.0):
            out[name] = ratio
    return out
