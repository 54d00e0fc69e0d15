"""GEMM for a decode batch of a few dozen rows: y = x @ W.T, x [M, K] with M <= MAX_ROWS.

At M = 64 a decode step's GEMMs are still weight reads (64 FLOP per weight byte, well under the
ratio of a data-centre GPU's tensor-core rate to its HBM bandwidth at which they turn
compute-bound), and cuBLAS's picks leave part of the HBM bandwidth unused on Qwen3-4B's
projections (bench/results/profile_step.md). This kernel reads them no faster
(0.90-1.09x of cuBLAS at 16-64 rows, bench/results/decode_tuning.md); it pays on small models,
whose projections are launch-bound (SmolLM2: 1.1-1.3x). Reading the RMSNorm or SiLU-and-mul
inside it on short rows was tried and measured no faster end to end (SmolLM2 at 64 rows), so
those stay separate kernels. Each program holds all M rows of x (padded to BLOCK_M for the
tensor cores) and streams BLOCK_N whole rows of W over one of SPLIT_K contiguous ranges of K; with
SPLIT_K > 1 a second kernel sums the fp32 partials and rounds once, as cuBLAS does. The
configuration is chosen per (N, K, BLOCK_M) on the first call by timing every candidate the way a
decode step runs it (serving/kernels/gemv_tuning.py), cuBLAS among them, so a shape where cuBLAS
is faster keeps cuBLAS.

Kernel files must not use `from __future__ import annotations` (see _compat.py).
"""

import logging
from typing import Any

import torch

from serving.kernels import gemv_tuning, pdl
from serving.kernels._compat import HAS_TRITON, require_triton, tl, triton
from serving.kernels.pdl import launch_next, wait_for_prior

log = logging.getLogger("vigil.kernels")

MIN_ROWS = 2  # one row is the GEMV's (serving/kernels/gemv.py)
# at 128 rows cuBLAS was faster on every projection measured (bench/results/decode_tuning.md)
MAX_ROWS = 64
CUBLAS = "cublas"  # the candidate that hands the shape back to torch


@triton.jit(do_not_specialize=["M"])
def _skinny_kernel(  # type: ignore[no-untyped-def]  # Triton kernel
    x_ptr,
    w_ptr,
    y_ptr,
    part_ptr,
    M,
    N,
    K,
    stride_x,
    stride_w,
    stride_y,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    launch_next(USE_PDL)
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_mask = offs_m < M
    n_mask = offs_n < N
    k_span = tl.cdiv(tl.cdiv(K, BLOCK_K), SPLIT_K) * BLOCK_K
    k_start = pid_k * k_span
    k_end = tl.minimum(k_start + k_span, K)
    x_rows = x_ptr + offs_m[:, None].to(tl.int64) * stride_x
    w_rows = w_ptr + offs_n[:, None].to(tl.int64) * stride_w
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    wait_for_prior(USE_PDL)
    for k0 in range(k_start, k_end, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_mask = offs_k < k_end
        x = tl.load(x_rows + offs_k[None, :], mask=m_mask[:, None] & k_mask[None, :], other=0.0)
        w = tl.load(
            w_rows + offs_k[None, :],
            mask=n_mask[:, None] & k_mask[None, :],
            other=0.0,
            eviction_policy="evict_first",
        )
        acc += tl.dot(x, tl.trans(w))
    out_mask = m_mask[:, None] & n_mask[None, :]
    if SPLIT_K == 1:
        y_ptrs = y_ptr + offs_m[:, None].to(tl.int64) * stride_y + offs_n[None, :]
        tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=out_mask)
    else:
        part = part_ptr + (pid_k * M + offs_m[:, None]).to(tl.int64) * N + offs_n[None, :]
        tl.store(part, acc, mask=out_mask)


@triton.jit(do_not_specialize=["M"])
def _sum_splits_kernel(  # type: ignore[no-untyped-def]  # Triton kernel
    part_ptr,
    y_ptr,
    M,
    N,
    stride_y,
    SPLIT_K: tl.constexpr,
    BLOCK: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    launch_next(USE_PDL)
    wait_for_prior(USE_PDL)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < M * N
    total = tl.zeros([BLOCK], dtype=tl.float32)
    for s in tl.static_range(SPLIT_K):
        total += tl.load(part_ptr + s * M * N + offs, mask=mask, other=0.0)
    row = offs // N
    col = offs % N
    tl.store(y_ptr + row.to(tl.int64) * stride_y + col, total.to(y_ptr.dtype.element_ty), mask=mask)


if HAS_TRITON:  # pragma: no cover - GPU machine
    # (BLOCK_N, BLOCK_K, SPLIT_K, warps, stages): narrow tiles give small-N projections enough
    # programs; split-K does the same for long K (the down projection's 9,728)
    _TRITON_CONFIGS = [
        triton.Config({"BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": sk}, num_warps=w, num_stages=s)
        for bn, bk, sk, w, s in [
            (16, 256, 1, 4, 3),
            (32, 128, 1, 4, 4),
            (32, 256, 1, 4, 3),
            (32, 128, 2, 4, 4),
            (32, 128, 4, 4, 4),
            (64, 128, 1, 4, 4),
            (64, 128, 2, 4, 4),
            (64, 128, 4, 4, 4),
            (128, 64, 1, 8, 4),
        ]
    ]
    CONFIGS: list[Any] = [CUBLAS, *_TRITON_CONFIGS]
else:
    CONFIGS = [CUBLAS]

# (N, K, BLOCK_M, dtype, device) -> the configuration chosen for it
_CHOSEN: dict[tuple[Any, ...], Any] = {}

# the engine's switch, read at every call; graphs captured before a change keep the old path
ENABLED = True


def block_rows(m: int) -> int:
    return max(16, triton.next_power_of_2(m)) if HAS_TRITON else m


def skinny_applies(x: torch.Tensor, weight: torch.Tensor) -> bool:
    return (
        ENABLED
        and HAS_TRITON
        and x.is_cuda
        and x.dim() == 2
        and MIN_ROWS <= x.shape[0] <= MAX_ROWS
        and weight.dtype in (torch.bfloat16, torch.float16)
        and x.dtype == weight.dtype
        and weight.stride(-1) == 1
        and weight.shape[0] >= 256
    )


def run(
    config: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """x @ weight.T (+ bias) with one configuration (CUBLAS: torch's F.linear)."""
    if isinstance(config, str):  # CUBLAS (a triton.Config compares only with its own kind)
        return torch.nn.functional.linear(x, weight, bias)
    m, k = x.shape
    n = weight.shape[0]
    y = torch.empty(m, n, dtype=x.dtype, device=x.device)
    split = config.kwargs["SPLIT_K"]
    part = torch.empty(split, m, n, dtype=torch.float32, device=x.device) if split > 1 else y
    use_pdl = pdl.enabled(x.device)
    _skinny_kernel[(triton.cdiv(n, config.kwargs["BLOCK_N"]), split)](
        x,
        weight,
        y,
        part,
        m,
        n,
        k,
        x.stride(0),
        weight.stride(0),
        y.stride(0),
        BLOCK_M=block_rows(m),
        USE_PDL=use_pdl,
        launch_pdl=use_pdl,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
        **config.kwargs,
    )
    if split > 1:
        block = 1024
        _sum_splits_kernel[(triton.cdiv(m * n, block),)](
            part, y, m, n, y.stride(0), SPLIT_K=split, BLOCK=block, USE_PDL=use_pdl,
            launch_pdl=use_pdl, num_warps=4,
        )  # fmt: skip
    if bias is not None:
        y += bias
    return y


def choose(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> object:
    """The configuration for this call's shape: remembered, or timed now on copies of the weight
    (never inside a graph capture: cuBLAS there, untimed)."""
    key = (*weight.shape, block_rows(x.shape[0]), x.dtype, x.device)
    config = _CHOSEN.get(key)
    if config is not None:
        return config
    if torch.cuda.is_current_stream_capturing():
        log.warning("GEMM %s first called inside a CUDA-graph capture: cuBLAS", key[:3])
        return CUBLAS
    _CHOSEN[key] = config = gemv_tuning.fastest_over_copies(
        CONFIGS, weight, lambda config, w: run(config, x, w, bias)
    )
    log.info("GEMM %s x %s: %s", x.shape[0], tuple(weight.shape), config)
    return config


def skinny_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """x [M, K] @ weight[N, K].T (+ bias) for MIN_ROWS <= M <= MAX_ROWS."""
    require_triton()
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(f"x has {x.shape[-1]} features, weight expects {weight.shape[1]}")
    if x.stride(-1) != 1:
        x = x.contiguous()
    return run(choose(x, weight, bias), x, weight, bias)
