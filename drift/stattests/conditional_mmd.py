"""Responses compared within matched prompt clusters: a stratified MMD permutation test.

A plain response MMD also fires when only the prompt mix moved (other prompts, other answers).
Here each row carries its prompt's stratum (the baseline prompt cluster it falls in); the
statistic is the weighted mean over strata of the unbiased MMD² between baseline and window
responses *of the same stratum*, weights = the window's rows per stratum, so a change in how
many prompts each cluster gets does not enter it. The permutation null shuffles the
baseline/window labels only within each stratum (a row's stratum never changes, so the weights
are fixed), which is exact under "same responses given the prompt cluster":
p = (1 + #{permuted ≥ observed}) / (1 + B).

The kernel is the RBF of drift.stattests.mmd, bandwidth by the median heuristic on the
reference only.
Strata with fewer than `min_stratum` rows on either side are left out (recorded); each side of
a stratum is capped at `max_per_stratum` rows by a seeded subsample, the baseline side also at
REF_PER_CURRENT times the window's rows there. Used on response
embeddings and on the standardised token statistics (logprob, entropy, lengths).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from drift.detectors.prompt_response import conditional_results
from drift.result import TestResult, insufficient
from drift.spec import TestSpec, register
from drift.stattests.mmd import median_bandwidth, permutation_mmd2, rbf_kernel

if TYPE_CHECKING:
    from drift.battery_inputs import TestInputs

N_PERMUTATIONS = 999
MAX_PER_STRATUM = 400
# a stratum's baseline rows beyond this many per window row add little power (it is bounded by
# the smaller side: at 4x the effective size is 80 % of what an endless baseline gives) while
# the permutation cost grows with the square of the rows
REF_PER_CURRENT = 4
MIN_STRATUM = 5
_PERM_CHUNK = 256


def _finite_rows(x: np.ndarray, strata: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 2:  # (0, d) stays as it is: reshape cannot infer a width from no rows
        x = x.reshape(len(x), -1)
    strata = np.asarray(strata)
    if len(strata) != len(x):
        raise ValueError(f"{len(strata)} strata labels for {len(x)} rows")
    keep = np.isfinite(x).all(axis=1)
    return x[keep], strata[keep]


def _cap(idx: np.ndarray, cap: int, rng: np.random.Generator) -> np.ndarray:
    return idx if idx.size <= cap else np.sort(rng.choice(idx, cap, replace=False))


def stratum_statistics(
    x: np.ndarray, y: np.ndarray, bandwidth: float, n_permutations: int, rng: np.random.Generator
) -> np.ndarray:
    """Unbiased MMD² of one stratum for the observed split (entry 0) and B within-stratum
    relabellings (entries 1..B)."""
    m, n = len(x), len(y)
    pooled = torch.from_numpy(np.ascontiguousarray(np.vstack([x, y]), dtype=np.float32))
    k = rbf_kernel(pooled, pooled, bandwidth)
    labels = np.concatenate([np.ones(m, np.float32), np.zeros(n, np.float32)])
    perms = rng.permuted(np.tile(labels, (n_permutations, 1)), axis=1)
    z_all = np.vstack([labels[None, :], perms]).T
    rows = k.double().sum(1)
    return torch.cat(
        [
            permutation_mmd2(
                k, torch.from_numpy(np.ascontiguousarray(z_all[:, s : s + _PERM_CHUNK])), rows
            )
            for s in range(0, z_all.shape[1], _PERM_CHUNK)
        ]
    ).numpy()


def _stratified_mmd_test(
    reference: np.ndarray,
    current: np.ndarray,
    *,
    threshold: float,
    rng: np.random.Generator,
    ref_strata: np.ndarray,
    cur_strata: np.ndarray,
    bandwidth: float | None = None,
    n_permutations: int = N_PERMUTATIONS,
    max_per_stratum: int = MAX_PER_STRATUM,
    min_stratum: int = MIN_STRATUM,
    min_samples: int = 50,
    effect_floor: float | None = None,
) -> TestResult:
    x, sx = _finite_rows(reference, ref_strata)
    y, sy = _finite_rows(current, cur_strata)
    if len(x) and len(y) and x.shape[1] != y.shape[1]:
        raise ValueError(
            f"conditional_mmd: current has dimension {y.shape[1]}, reference {x.shape[1]}"
        )
    # enough permutations that p can reach the threshold at all: min p = 1 / (1 + B)
    n_permutations = max(int(n_permutations), math.ceil(1.0 / threshold - 1.0 - 1e-9))
    used: list[tuple[Any, np.ndarray, np.ndarray]] = []
    dropped: list[tuple[Any, np.ndarray, np.ndarray]] = []
    for s in np.unique(np.concatenate([sx, sy])):
        ix, iy = np.flatnonzero(sx == s), np.flatnonzero(sy == s)
        (used if min(ix.size, iy.size) >= min_stratum else dropped).append((s, ix, iy))
    n_ref = sum(ix.size for _, ix, _ in used)
    n_cur = sum(iy.size for _, _, iy in used)
    if n_ref < min_samples or n_cur < min_samples:
        return insufficient("conditional_mmd", threshold, n_ref, n_cur, min_samples)
    sigma = float(bandwidth) if bandwidth is not None else median_bandwidth(x, rng)
    total = np.zeros(1 + n_permutations)
    per_stratum = []
    for s, ix, iy in used:
        stats_s = stratum_statistics(
            x[_cap(ix, min(max_per_stratum, REF_PER_CURRENT * max(iy.size, min_stratum)), rng)],
            y[_cap(iy, max_per_stratum, rng)],
            sigma,
            n_permutations,
            rng,
        )
        total += iy.size / n_cur * stats_s
        per_stratum.append(
            {
                "stratum": int(s) if isinstance(s, int | np.integer) else str(s),
                "n_reference": int(ix.size),
                "n_current": int(iy.size),
                "mmd2": float(stats_s[0]),
            }
        )
    observed = float(total[0])
    p = (1 + int(np.sum(total[1:] >= observed))) / (1 + n_permutations)
    return TestResult(
        test="conditional_mmd",
        statistic=observed,
        p_value=p,
        threshold=threshold,
        drifted=False,  # the spec's verdict decides (TestSpec.run)
        detail={
            "bandwidth": sigma,
            "n_reference": n_ref,
            "n_current": n_cur,
            "strata": per_stratum,
            "strata_dropped": len(dropped),
            "rows_dropped": int(sum(ix.size + iy.size for _, ix, iy in dropped)),
            "permutations": n_permutations,
            "effect_floor": effect_floor,
        },
    )


def frozen_args(inputs: TestInputs, feature: str) -> dict[str, Any]:
    return {"n_permutations": inputs.options.mmd_permutations}


SPEC = register(
    TestSpec(
        name="conditional_mmd",
        kind="embedding",
        direction="p_value",
        default_threshold=0.001,
        min_samples=50,
        collect=conditional_results,
        func=_stratified_mmd_test,
        args=frozen_args,
        per_feature=False,  # needs prompt strata: drift.detectors.prompt_response runs it
        description="MMD² of responses within matched prompt clusters, "
        "stratified permutation p-value",
        display_name="the prompt-conditioned MMD",
        unit="MMD² within prompt clusters",
    )
)


def stratified_mmd_test(reference: np.ndarray, current: np.ndarray, **kwargs: Any) -> TestResult:
    """The test with its spec's verdict (the registered function only measures)."""
    return SPEC.run(reference, current, **kwargs)
