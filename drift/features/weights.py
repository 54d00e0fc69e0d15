"""Sample weights: make the whole-window ("*") comparison represent traffic, not the sample.

The engine logs a stratified sample (a base rate plus a per-segment hourly minimum, so small
segments are over-sampled) and records `sample_weight` = 1 / inclusion probability. Within a
segment the weights are ~constant, so per-segment tests compare like with like; the whole
window's segment mix, though, is the sample's, and it moves with the traffic (a quiet hour is
mostly per-segment minimums), which the tests would report as drift.

Method — seeded systematic thinning, without replacement: row i is kept with probability
pi_i = w_i / max(w). The kept rows, unweighted, have the population's mix (E[#kept from a
stratum] is proportional to that stratum's population), so every test runs unchanged on them.
Rows are ordered by weight (random order within equal weights) before the systematic pass, so
each weight class keeps its exact share ±1 row instead of a binomial one.

Why not size the draw at the effective sample size (sum w)^2 / sum w^2: a fixed-size
proportional draw of m rows needs pi_i = m w_i / sum w, which exceeds 1 for every row heavier
than the w-weighted mean weight whenever weights differ. Without replacement those rows would be
capped (under-represented: the bias comes back); with replacement they would be duplicated,
and duplicates are ties that distort KS and MMD. Thinning keeps sum w / max w rows, which is
never more than the effective sample size (sum w^2 <= max w * sum w), so p-values are not
overstated; the cost is some power when weights are very unequal. The ESS is recorded with
each "*" result.

No row may dominate: before thinning each weight is capped at `ROW_WEIGHT_CAP` (20) times the
median weight, and lower still if needed so that thinning keeps at least min(n, `MIN_KEPT_ROWS`)
rows. Without the cap one row of weight 1e6 among 5,000 of weight 10 would set max(w) and keep
about one row in 5,000: the "*" tests would come back insufficient, and whoever sent that row
would have blinded them. The median, not the mean, sets the cap, so the row it guards against
cannot raise it. Legitimate weights (a base rate and over-sampled small segments, a few-fold
apart) are far below the cap and left as they are; capped rows count as less traffic than they
claimed, and the count of capped rows is recorded with each "*" result.

When the weights are absent or all equal nothing is resampled (results are bit-identical to an
unweighted run).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from drift.features.feature_set import EmbeddingBlock, FeatureSet
from drift.features.vector_subset import vector_keep_weights

ROW_WEIGHT_CAP = 20.0  # a row's weight is at most this many times the median weight
MIN_KEPT_ROWS = 100  # thinning keeps at least min(n, this) rows, whatever the weights


@dataclass(frozen=True)
class Weighting:
    """What weighting did to one side: rows before, their ESS, rows kept."""

    n_rows: int
    ess: float
    n_kept: int
    n_capped: int = 0  # rows whose weight was capped (ROW_WEIGHT_CAP, MIN_KEPT_ROWS)


@dataclass
class Population:
    """A feature set as the population mix, and how it was made (None: used as it is)."""

    features: FeatureSet
    weighting: Weighting | None = None
    rows: np.ndarray | None = None  # kept rows of the original set, ascending

    @property
    def applied(self) -> bool:
        return self.weighting is not None


def effective_sample_size(weights: np.ndarray) -> float:
    """Kish's effective sample size (sum w)^2 / sum w^2 (n for equal weights)."""
    w = np.asarray(weights, dtype=np.float64)
    if w.size == 0:
        return 0.0
    return float(w.sum() ** 2 / np.square(w).sum())


def is_uniform(weights: np.ndarray | None) -> bool:
    """No weights, or all equal: the sample already has the population's mix."""
    return weights is None or weights.size == 0 or bool(np.all(weights == weights.flat[0]))


def _expected_kept(w: np.ndarray, cap: float) -> float:
    return float(np.minimum(w, cap).sum() / cap)


def capped_weights(weights: np.ndarray) -> np.ndarray:
    """`weights` with each at most ROW_WEIGHT_CAP x the median, and capped further where needed
    so that thinning keeps at least min(n, MIN_KEPT_ROWS) rows (sum min(w, c) / c >= k)."""
    w = np.asarray(weights, dtype=np.float64)
    if w.size == 0:
        return w
    cap = min(float(w.max()), ROW_WEIGHT_CAP * float(np.median(w)))
    wanted = min(w.size, MIN_KEPT_ROWS)
    if _expected_kept(w, cap) < wanted:
        # sum min(w, c) / c falls as c grows, and equals n at c = min(w): bisect for the largest
        # cap that still keeps `wanted` rows
        lo, hi = float(w.min()), cap
        for _ in range(100):
            mid = (lo + hi) / 2
            if _expected_kept(w, mid) >= wanted:
                lo = mid
            else:
                hi = mid
        cap = lo
    return np.minimum(w, cap)


def thinning_rows(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Ascending rows kept by systematic sampling with inclusion probability w_i / max(w)."""
    w = np.asarray(weights, dtype=np.float64)
    if w.size == 0:
        return np.empty(0, np.int64)
    if not (np.isfinite(w).all() and (w > 0).all()):
        raise ValueError("sample weights must be finite and > 0")
    pi = w / w.max()
    # implicit stratification: by weight, random within ties (a permutation, then stable sort)
    perm = rng.permutation(w.size)
    order = perm[np.argsort(pi[perm], kind="stable")]
    cum = np.cumsum(pi[order])
    prev = np.concatenate(([0.0], cum[:-1]))
    u = rng.uniform()
    # the points u, u+1, u+2, ... : interval (prev, cum] of length pi <= 1 holds at most one
    hit = (np.floor(cum - u) > np.floor(prev - u)) | (pi[order] >= 1.0)
    return np.sort(order[hit]).astype(np.int64)


def population_sample(fs: FeatureSet, rng: np.random.Generator) -> Population:
    """`fs` thinned to the population mix (embeddings in step; rows with vectors thinned once
    more where segments hold vectors at different rates, drift.features.vector_subset), or `fs`
    itself if unweighted and every segment's vectors stand for it alike."""
    keep = vector_keep_weights(fs)
    if fs.weights is None or is_uniform(fs.weights):
        if not keep:
            return Population(fs)
        rows = np.arange(fs.n, dtype=np.int64)
        info = Weighting(n_rows=fs.n, ess=float(fs.n), n_kept=fs.n)
        thinned = fs
    else:
        weights = capped_weights(fs.weights)
        rows = thinning_rows(weights, rng)
        info = Weighting(
            n_rows=fs.n,
            ess=effective_sample_size(weights),
            n_kept=int(rows.size),
            n_capped=int(np.count_nonzero(weights < fs.weights)),
        )
        thinned = fs.take(rows)
    if keep:
        thinned = _thin_vector_rows(fs, thinned, rows, keep, rng)
    return Population(thinned, info, rows)


def _thin_vector_rows(
    fs: FeatureSet,
    thinned: FeatureSet,
    rows: np.ndarray,
    keep: dict[str, np.ndarray],
    rng: np.random.Generator,
) -> FeatureSet:
    """`thinned` (the rows `rows` of `fs`) with each block in `keep` thinned by its keep
    weights (aligned with the block's rows in `fs`)."""
    blocks = dict(thinned.embeddings)
    for name, ratio in keep.items():
        block = thinned.embeddings[name]
        in_fs = np.searchsorted(fs.embeddings[name].rows, rows[block.rows])
        kept = thinning_rows(ratio[in_fs], rng)
        blocks[name] = EmbeddingBlock(block.rows[kept], block.vectors[kept])
    return replace(thinned, embeddings=blocks)


def weighting_detail(reference: Population, current: Population) -> dict[str, Any]:
    """What a "*" result records when either side was weighted ({} when neither was)."""
    if not (reference.applied or current.applied):
        return {}
    out: dict[str, Any] = {"weighted": True, "weighting_method": "systematic thinning w/max(w)"}
    for side, pop in (("reference", reference), ("current", current)):
        info = pop.weighting or Weighting(pop.features.n, float(pop.features.n), pop.features.n)
        out[f"ess_{side}"] = info.ess
        out[f"n_rows_{side}"] = info.n_rows
        out[f"n_resampled_{side}"] = info.n_kept
        out[f"n_capped_{side}"] = info.n_capped
    return out


def block_rows_to_original(
    orig: FeatureSet, pop: Population, name: str, idx: list[int]
) -> list[int]:
    """Map indices into the thinned set's `name` embedding block back to the original block."""
    if pop.rows is None:
        return list(idx)
    thinned = pop.features.embeddings[name].rows[np.asarray(idx, dtype=np.int64)]
    original_rows = pop.rows[thinned]
    return np.searchsorted(orig.embeddings[name].rows, original_rows).astype(int).tolist()
