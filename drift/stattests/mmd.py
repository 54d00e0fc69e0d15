"""MMD² two-sample test on embeddings: unbiased estimator, RBF kernel, permutation p-value.

Kernel k(x, y) = exp(-|x - y|² / (2σ²)) with σ the median pairwise distance of the *reference*
(median heuristic). Fixing σ from the reference alone keeps the kernel independent of the
labels (so the permutation test stays exact) and lets the reference block K_xx be computed once
per baseline and cached (`MMDReference`).

p-value = (1 + #{permuted MMD² ≥ observed}) / (1 + B), never 0. All B permutations are scored
at once: with the pooled kernel K and a label matrix Z (one column per permutation, column 0 the
observed split), zᵀKz for every column is one matrix product K @ Z.

Speed and its price: each side is capped at `max_samples` (default 2000) by a seeded subsample,
so a 50,000-row window costs the same as a 2,000-row one. The price is power: the null spread
of the unbiased MMD² shrinks like 1/n, so the smallest detectable MMD² grows like 1/max_samples —
capping 50,000 → 2,000 makes it ~25× larger. A 10 % mixture of a distinct cluster has
MMD² = 0.1² · MMD²(P, Q), which at 2,000 per side is still detected (tests/drift measures it);
rarer groups are left to the cluster detector (drift.detectors.clusters), which looks at every
point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from drift.result import TestResult, insufficient
from drift.spec import TestSpec, register

if TYPE_CHECKING:
    from drift.battery_inputs import TestInputs

MAX_SAMPLES = 2000
N_PERMUTATIONS = 999
_PERM_CHUNK = 256


def _as_tensor(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))


def sq_dists(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    d = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * (a @ b.T)
    return d.clamp_min_(0.0)


def rbf_kernel(a: torch.Tensor, b: torch.Tensor, bandwidth: float) -> torch.Tensor:
    return torch.exp(sq_dists(a, b) * (-0.5 / bandwidth**2))


def median_bandwidth(x: np.ndarray, rng: np.random.Generator, max_points: int = 600) -> float:
    """σ = median pairwise Euclidean distance (on a seeded subsample of ≤ max_points rows)."""
    if len(x) > max_points:
        x = x[rng.choice(len(x), max_points, replace=False)]
    t = _as_tensor(x)
    d = sq_dists(t, t)
    iu = torch.triu_indices(len(x), len(x), offset=1)
    med = float(torch.quantile(torch.sqrt(d[iu[0], iu[1]].double()), 0.5)) if len(x) > 1 else 1.0
    return med if med > 0 else 1.0


@dataclass
class MMDReference:
    """The frozen reference side: a seeded subsample, its bandwidth, its cached kernel block."""

    vectors: np.ndarray
    bandwidth: float
    _kxx: torch.Tensor | None = field(default=None, repr=False, compare=False)

    def kernel_xx(self) -> torch.Tensor:
        if self._kxx is None:
            x = _as_tensor(self.vectors)
            self._kxx = rbf_kernel(x, x, self.bandwidth)
        return self._kxx


def prepare_reference(
    reference: np.ndarray, *, rng: np.random.Generator, max_samples: int = MAX_SAMPLES
) -> MMDReference:
    x = np.asarray(reference, dtype=np.float32)
    x = x[np.isfinite(x).all(axis=1)]
    if len(x) > max_samples:
        x = x[np.sort(rng.choice(len(x), max_samples, replace=False))]
    return MMDReference(vectors=x, bandwidth=median_bandwidth(x, rng))


def permutation_mmd2(
    k: torch.Tensor, z: torch.Tensor, rows: torch.Tensor | None = None
) -> torch.Tensor:
    """Unbiased MMD² for each label column of z (1 = reference side), from the pooled kernel k.

    `rows` (k's row sums in float64) may be passed in when scoring several chunks of z.
    """
    m = z[:, 0].sum().item()
    n = k.shape[0] - m
    kz = (k @ z).double()
    z64 = z.double()
    zkz = (z64 * kz).sum(0)  # Σ_{i,j ∈ X} k_ij, diagonal included
    rows = k.double().sum(1) if rows is None else rows
    zk1 = z64.T @ rows  # Σ_{i ∈ X, all j} k_ij
    total = rows.sum()
    diag = torch.diagonal(k).double()
    dx = z64.T @ diag
    s_xx = zkz - dx
    s_yy = total - 2.0 * zk1 + zkz - (diag.sum() - dx)
    s_xy = zk1 - zkz
    return s_xx / (m * (m - 1)) + s_yy / (n * (n - 1)) - 2.0 * s_xy / (m * n)


def _mmd_test(
    reference: np.ndarray,
    current: np.ndarray,
    *,
    threshold: float,
    rng: np.random.Generator,
    prepared: MMDReference | None = None,
    n_permutations: int = N_PERMUTATIONS,
    max_samples: int = MAX_SAMPLES,
    min_samples: int = 20,
    effect_floor: float | None = None,
) -> TestResult:
    ref = (
        prepared
        if prepared is not None
        else prepare_reference(reference, rng=rng, max_samples=max_samples)
    )
    y = np.asarray(current, dtype=np.float32)
    y = y[np.isfinite(y).all(axis=1)] if y.ndim == 2 else y.reshape(0, ref.vectors.shape[1])
    n_cur_all = len(y)
    if len(ref.vectors) < min_samples or n_cur_all < min_samples:
        return insufficient("mmd", threshold, len(ref.vectors), n_cur_all, min_samples)
    if y.shape[1] != ref.vectors.shape[1]:
        raise ValueError(
            f"mmd: current has dimension {y.shape[1]}, reference {ref.vectors.shape[1]}"
        )
    if len(y) > max_samples:
        y = y[np.sort(rng.choice(len(y), max_samples, replace=False))]
    # enough permutations that p can reach the threshold at all: min p = 1 / (1 + B)
    n_permutations = max(int(n_permutations), math.ceil(1.0 / threshold - 1.0 - 1e-9))
    m, n = len(ref.vectors), len(y)
    x_t, y_t = _as_tensor(ref.vectors), _as_tensor(y)
    kxy = rbf_kernel(x_t, y_t, ref.bandwidth)
    kyy = rbf_kernel(y_t, y_t, ref.bandwidth)
    k = torch.cat([torch.cat([ref.kernel_xx(), kxy], 1), torch.cat([kxy.T, kyy], 1)], 0)

    labels = np.concatenate([np.ones(m, np.float32), np.zeros(n, np.float32)])
    perms = rng.permuted(np.tile(labels, (n_permutations, 1)), axis=1)
    z_all = np.vstack([labels[None, :], perms]).T  # (N, 1 + B); column 0 is the observed split
    rows = k.double().sum(1)
    stats_all = torch.cat(
        [
            permutation_mmd2(
                k, torch.from_numpy(np.ascontiguousarray(z_all[:, s : s + _PERM_CHUNK])), rows
            )
            for s in range(0, z_all.shape[1], _PERM_CHUNK)
        ]
    )
    observed = float(stats_all[0])
    exceed = int((stats_all[1:] >= stats_all[0]).sum())
    p = (1 + exceed) / (1 + n_permutations)
    return TestResult(
        test="mmd",
        statistic=observed,
        p_value=p,
        threshold=threshold,
        drifted=False,  # the spec's verdict decides (TestSpec.run)
        detail={
            "bandwidth": ref.bandwidth,
            "n_reference": m,
            "n_current": n,
            "n_current_total": n_cur_all,
            "permutations": n_permutations,
            "effect_floor": effect_floor,
        },
    )


def frozen_args(inputs: TestInputs, feature: str) -> dict[str, Any]:
    return {
        "prepared": inputs.mmd_refs.get(feature),
        "n_permutations": inputs.options.mmd_permutations,
        "max_samples": inputs.options.mmd_max_samples,
    }


SPEC = register(
    TestSpec(
        name="mmd",
        kind="embedding",
        direction="p_value",
        default_threshold=0.001,
        min_samples=20,
        func=_mmd_test,
        args=frozen_args,
        costly=True,
        description="unbiased MMD², RBF kernel (median heuristic), permutation p-value",
        display_name="MMD",
        unit="MMD²",
        validation_threshold=0.001,
    )
)


def mmd_test(reference: np.ndarray, current: np.ndarray, **kwargs: Any) -> TestResult:
    """The test with its spec's verdict (the registered function only measures)."""
    return SPEC.run(reference, current, **kwargs)
