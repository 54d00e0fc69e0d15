"""Responses as a whole, several kernels under one permutation test (an aggregated MMD).

A quiet model swap (an earlier checkpoint, another quantization, another sampling default)
moves the answers a little in several places at once: their embeddings, their token
confidence, their length. One MMD with one bandwidth on one of them sees only a part, and a
Bonferroni correction over several such tests pays for independence they do not have. Here
each row is a response's embedding and its standardised token statistics (column blocks);
every block is compared with

- Gaussian (RBF) kernels at `BANDWIDTH_SCALES` times its median pairwise distance on the
  reference, each through `RFF_FEATURES` random Fourier features (cos(wᵀx + b), w drawn for
  that bandwidth), and
- the linear kernel,

each giving, for the observed split and the same B relabellings, the squared distance between
the two sides' mean feature vectors (the biased MMD² of that kernel; for the Fourier features of
an approximate Gaussian kernel, drawn without looking at the labels). Each kernel's values are
standardised by their mean and sd over those 1 + B splits, and the test statistic is the
largest standardised value over the kernels. Standardising and taking the maximum treat the
1 + B splits alike, so under "same responses" the observed split is exchangeable with the
relabellings and p = (1 + #{relabelled ≥ observed}) / (1 + B) is exact whatever the features;
the kernels' null correlation enters through the shared relabellings, not an assumption.

With `ref_strata` / `cur_strata` (the prompt cluster of each row) the labels are shuffled only
within a stratum, so a change in the prompt mix alone is not evidence (each stratum keeps its
rows per side under the null): the test asks whether answers to like prompts changed. Each row
is then also centred on its stratum's mean over both sides, so the kernels see how answers vary
within a kind of prompt, not the gaps between kinds, which would swamp a small change. The
pooled mean of a stratum is the same for every relabelling within it, so the test stays exact.

Cost: each side is capped by a seeded subsample (the window at `max_current` rows, the
reference at `ref_per_current` times the window's rows, at most `max_reference`); every kernel
together costs one (N x F) @ (N x B) product, F the feature columns (about 1,000), where exact
Gaussian kernels would cost one (N x N) @ (N x B) each.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from drift.detectors.prompt_response import aggregate_results
from drift.result import TestResult, insufficient
from drift.spec import TestSpec, register
from drift.stattests.mmd import median_bandwidth

if TYPE_CHECKING:
    from drift.battery_inputs import TestInputs

NAME = "response_agg"
N_PERMUTATIONS = 999
BANDWIDTH_SCALES = (0.5, 1.0, 2.0)
MAX_CURRENT = 600
MAX_REFERENCE = 1800
RFF_FEATURES = 256
REF_PER_CURRENT = 4
_PERM_CHUNK = 256


def stratified_labels(
    strata: np.ndarray, is_ref: np.ndarray, n_permutations: int, rng: np.random.Generator
) -> np.ndarray:
    """(N, 1 + B) float32 labels (1 = reference); column 0 observed, the rest shuffled within
    each stratum."""
    z = np.empty((len(is_ref), 1 + n_permutations), dtype=np.float32)
    z[:, 0] = is_ref
    for s in np.unique(strata):
        idx = np.flatnonzero(strata == s)
        z[idx, 1:] = rng.permuted(np.tile(is_ref[idx], (n_permutations, 1)), axis=1).T
    return z


def centre_within(pooled: np.ndarray, strata: np.ndarray) -> np.ndarray:
    """Each row minus the mean of its stratum's rows (both sides together)."""
    out = pooled.copy()
    for s in np.unique(strata):
        rows = strata == s
        out[rows] -= pooled[rows].mean(0)
    return out


def fourier_features(
    x: np.ndarray, bandwidth: float, n_features: int, rng: np.random.Generator
) -> np.ndarray:
    """(N, n_features) map whose inner products approximate exp(-|x - y|² / (2 bandwidth²))."""
    w = (rng.standard_normal((x.shape[1], n_features)) / bandwidth).astype(np.float32)
    b = rng.uniform(0.0, 2.0 * np.pi, n_features).astype(np.float32)
    # float32: the products feed a float32 matrix product anyway
    return np.float32(np.sqrt(2.0 / n_features)) * np.cos(x.astype(np.float32) @ w + b)


def kernel_features(
    pooled: np.ndarray,
    blocks: tuple[tuple[str, int, int], ...],
    n_ref: int,
    rng: np.random.Generator,
    scales: tuple[float, ...] = BANDWIDTH_SCALES,
    n_features: int = RFF_FEATURES,
) -> dict[str, np.ndarray]:
    """Every kernel's feature map of the pooled rows, keyed `block:kernel`."""
    out: dict[str, np.ndarray] = {}
    for name, lo, hi in blocks:
        part = pooled[:, lo:hi]
        if part.shape[1] == 0:
            continue
        sigma = median_bandwidth(part[:n_ref], rng)
        for scale in scales:
            out[f"{name}:rbf{scale:g}"] = fourier_features(part, sigma * scale, n_features, rng)
        out[f"{name}:linear"] = part
    return out


def kernel_statistics(features: dict[str, np.ndarray], z: np.ndarray) -> dict[str, np.ndarray]:
    """Every kernel's MMD² for every label column: one product for all kernels together."""
    keys = list(features)
    widths = np.cumsum([0] + [features[k].shape[1] for k in keys])
    t = torch.from_numpy(np.ascontiguousarray(np.hstack([features[k] for k in keys]), np.float32))
    zt = torch.from_numpy(np.ascontiguousarray(z, dtype=np.float32))
    m = float(z[:, 0].sum())
    n = len(t) - m
    ref_sum = (zt.T @ t).double()  # (1 + B, F)
    diff = ref_sum / m - (t.double().sum(0)[None, :] - ref_sum) / n
    sq = diff * diff
    return {k: sq[:, widths[i] : widths[i + 1]].sum(1).numpy() for i, k in enumerate(keys)}


def combine(stats: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[str, float]]:
    """Largest standardised statistic per column, and each kernel's observed z."""
    zs = {}
    for key, v in stats.items():
        sd = float(v.std())
        zs[key] = (v - v.mean()) / sd if sd > 0 else np.zeros_like(v)
    table = np.vstack(list(zs.values()))
    return table.max(0), {k: float(v[0]) for k, v in zs.items()}


def _matrix(values: np.ndarray) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64)
    if x.ndim == 2:
        return x
    return x.reshape(len(x), -1) if x.size else np.empty((len(x), 0))


def _cap(idx: np.ndarray, cap: int, rng: np.random.Generator) -> np.ndarray:
    return idx if idx.size <= cap else np.sort(rng.choice(idx, cap, replace=False))


def _response_agg_test(
    reference: np.ndarray,
    current: np.ndarray,
    *,
    threshold: float,
    rng: np.random.Generator,
    blocks: tuple[tuple[str, int, int], ...] | None = None,
    ref_strata: np.ndarray | None = None,
    cur_strata: np.ndarray | None = None,
    n_permutations: int = N_PERMUTATIONS,
    scales: tuple[float, ...] = BANDWIDTH_SCALES,
    max_current: int = MAX_CURRENT,
    max_reference: int = MAX_REFERENCE,
    min_samples: int = 30,
    effect_floor: float | None = None,
) -> TestResult:
    x, y = _matrix(reference), _matrix(current)
    if len(x) and len(y) and x.shape[1] != y.shape[1]:
        raise ValueError(f"{NAME}: current has dimension {y.shape[1]}, reference {x.shape[1]}")
    sx = np.zeros(len(x), int) if ref_strata is None else np.asarray(ref_strata)
    sy = np.zeros(len(y), int) if cur_strata is None else np.asarray(cur_strata)
    if len(sx) != len(x) or len(sy) != len(y):
        raise ValueError(f"{NAME}: one stratum label per row is needed")
    keep_x, keep_y = np.isfinite(x).all(axis=1), np.isfinite(y).all(axis=1)
    x, sx, y, sy = x[keep_x], sx[keep_x], y[keep_y], sy[keep_y]
    if len(x) < min_samples or len(y) < min_samples:
        return insufficient(NAME, threshold, len(x), len(y), min_samples)
    iy = _cap(np.arange(len(y)), max_current, rng)
    ix = _cap(np.arange(len(x)), min(max_reference, REF_PER_CURRENT * iy.size), rng)
    pooled = np.vstack([x[ix], y[iy]])
    strata = np.concatenate([sx[ix].astype(str), sy[iy].astype(str)])
    is_ref = np.concatenate([np.ones(ix.size, np.float32), np.zeros(iy.size, np.float32)])
    # enough permutations that p can reach the threshold at all: min p = 1 / (1 + B)
    n_permutations = max(int(n_permutations), math.ceil(1.0 / threshold - 1.0 - 1e-9))
    z = stratified_labels(strata, is_ref, n_permutations, rng)
    if ref_strata is not None or cur_strata is not None:
        pooled = centre_within(pooled, strata)
    spans = blocks or (("all", 0, pooled.shape[1]),)
    features = kernel_features(pooled, spans, ix.size, rng, scales)
    combined, observed = combine(kernel_statistics(features, z))
    p = (1 + int(np.sum(combined[1:] >= combined[0]))) / (1 + n_permutations)
    statistic = float(combined[0])
    return TestResult(
        test=NAME,
        statistic=statistic,
        p_value=p,
        threshold=threshold,
        drifted=False,  # the spec's verdict decides (TestSpec.run)
        detail={
            "kernel_z": observed,
            "strongest": max(observed, key=lambda k: observed[k]),
            "n_reference": int(ix.size),
            "n_current": int(iy.size),
            "n_current_total": len(y),
            "strata": int(len(np.unique(strata))),
            "permutations": n_permutations,
            "effect_floor": effect_floor,
        },
    )


def frozen_args(inputs: TestInputs, feature: str) -> dict[str, Any]:
    return {"n_permutations": inputs.options.mmd_permutations}


SPEC = register(
    TestSpec(
        name=NAME,
        kind="embedding",
        direction="p_value",
        default_threshold=0.001,
        min_samples=30,
        collect=aggregate_results,
        func=_response_agg_test,
        args=frozen_args,
        # needs the response blocks and prompt strata: drift.detectors.prompt_response
        per_feature=False,
        costly=True,
        calibrated=True,
        description="responses (embedding and token statistics) under several kernels, "
        "largest standardised MMD² over one within-prompt-cluster permutation null",
        display_name="the response test",
        unit="standardised MMD²",
    )
)


def response_agg_test(reference: np.ndarray, current: np.ndarray, **kwargs: Any) -> TestResult:
    """The test with its spec's verdict (the registered function only measures)."""
    return SPEC.run(reference, current, **kwargs)
