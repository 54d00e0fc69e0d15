"""Matrix-vector product for one decode token: y = x @ W.T (+ b), W [N, K] row-major.

At M = 1 cuBLAS picks split-K GEMM kernels that leave a good part of the HBM bandwidth unused
on common layer shapes (bench/results/profile_step.md); a decode step at batch 1 is all weight
reads, so the bandwidth reached is the step's speed. Here each program streams BLOCK_N whole rows
of W (coalesced along K) against x held in registers, accumulates in fp32 and rounds once,
as cuBLAS does. A shape's launch configuration is chosen on its first call (the CUDA-graph
warm-up makes that call before capture) by timing every candidate as a decode step runs it:
back-to-back over L2-overflowing weight copies (serving/kernels/gemv_tuning.py). The next weight
chunk is loaded one iteration ahead, and the first one
before waiting on the kernel before (programmatic dependent launch, serving/kernels/pdl.py), so the
weight stream starts while a norm or attention kernel still runs.

`gemv_silu` reads x as silu(gate) * up from a [gate | up] row, rounded like
`fused_ops.silu_and_mul` (bf16 silu, then the bf16 product), so the MLP's down projection needs
no separate activation kernel.

Kernel files must not use `from __future__ import annotations` (see _compat.py).
"""

import logging
from typing import Any

import torch

from serving.kernels import gemv_tuning, pdl
from serving.kernels._compat import HAS_TRITON, require_triton, tl, triton
from serving.kernels.gemv_inputs import row_rstd, x_chunk
from serving.kernels.pdl import launch_next, wait_for_prior


def _gemv_body(  # type: ignore[no-untyped-def]  # Triton kernel
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    res_ptr,
    nw_ptr,
    new_res_ptr,
    N,
    K,
    stride_w,
    eps,
    HAS_BIAS: tl.constexpr,
    SILU: tl.constexpr,
    NORM: tl.constexpr,
    HAS_RES: tl.constexpr,
    USE_PDL: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    cols = tl.arange(0, BLOCK_K)
    w_rows = w_ptr + rows[:, None].to(tl.int64) * stride_w
    # weights are never written by a step's kernels: the first chunk is read before the wait
    w_next = tl.load(
        w_rows + cols[None, :],
        mask=row_mask[:, None] & (cols < K)[None, :],
        other=0.0,
        eviction_policy="evict_first",
    )
    launch_next(USE_PDL)
    wait_for_prior(USE_PDL)
    rstd = 0.0
    if NORM:  # every program computes the norm of the whole (short) row; program 0 stores the sum
        rstd = row_rstd(x_ptr, res_ptr, new_res_ptr, K, eps, HAS_RES, BLOCK_K)
    acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        w = w_next
        k_ahead = k0 + BLOCK_K + cols  # one chunk ahead: two weight loads in flight per program
        w_next = tl.load(
            w_rows + k_ahead[None, :],
            mask=row_mask[:, None] & (k_ahead < K)[None, :],
            other=0.0,
            eviction_policy="evict_first",
        )
        x = x_chunk(x_ptr, res_ptr, nw_ptr, k0 + cols, K, rstd, SILU, NORM, HAS_RES)
        acc += w.to(tl.float32) * x[None, :]
    y = tl.sum(acc, axis=1)
    if HAS_BIAS:
        y += tl.load(b_ptr + rows, mask=row_mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + rows, y.to(y_ptr.dtype.element_ty), mask=row_mask)


if HAS_TRITON:  # pragma: no cover - GPU machine
    # few rows and long K chunks keep enough bytes in flight when N is small (o/down projections)
    _CONFIGS = [
        triton.Config({"BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=s)
        for bn, bk, w, s in [
            (1, 2048, 4, 2),
            (2, 1024, 4, 3),
            (2, 2048, 8, 2),
            (4, 512, 4, 3),
            (4, 1024, 4, 3),
            (4, 1024, 8, 3),
            (4, 2048, 8, 2),
            (8, 256, 4, 3),
            (8, 512, 4, 3),
            (8, 512, 8, 3),
            (8, 1024, 8, 3),
            (16, 256, 8, 3),
            # deeper pipelines: more loads in flight per SM for the long rows of Qwen3-4B's layers
            (1, 1024, 4, 4),
            (2, 1024, 4, 4),
            (2, 2048, 4, 3),
            (4, 512, 4, 4),
            (4, 1024, 4, 4),
            (8, 256, 4, 4),
            (8, 512, 4, 4),
            (16, 512, 8, 3),
            (32, 128, 4, 4),
            (32, 256, 8, 3),
        ]
    ]
_gemv_kernel = triton.jit(_gemv_body)

log = logging.getLogger("vigil.kernels")

# (N, K, SiLU, norm, dtype, device) -> the configuration chosen for it; one per shape
# whatever the launch mode, so launches with and without PDL compute the same bits
_CHOSEN: dict[tuple[Any, ...], Any] = {}  # values: triton.Config

# where the kernel pays: one token, a 16-bit weight big enough that bandwidth is the cost
_MIN_WEIGHT_ELEMENTS = 1 << 16


# the norm read inside the GEMV: each program recomputes it over the whole row, which beats a
# separate RMSNorm launch on short rows (SmolLM2, K = 576) and loses on long ones (Qwen3-4B,
# K = 2560; batch-1 decode rates of both in bench/results/throughput.md)
MAX_FUSED_NORM_FEATURES = 1024

# SiLU-and-mul read inside the down projection: every program recomputes the activation of the
# whole row, which is free next to the weight reads on short rows (SmolLM2, 1,536) and costs the
# most of any projection on long ones (Qwen3-4B, 9,728: 2.5 TB/s against 3.2-3.8 for the others,
# bench/results/gemv.md), where one separate activation kernel is cheaper
MAX_FUSED_SILU_FEATURES = 4096


def gemv_applies(x: torch.Tensor, weight: torch.Tensor) -> bool:
    return (
        HAS_TRITON
        and x.is_cuda
        and x.dim() == 2
        and x.shape[0] == 1
        and weight.dtype in (torch.bfloat16, torch.float16)
        and x.dtype == weight.dtype
        and weight.stride(-1) == 1
        and weight.numel() >= _MIN_WEIGHT_ELEMENTS
    )


def _launch(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    silu: bool = False,
    residual: torch.Tensor | None = None,
    norm: tuple[torch.Tensor, float] | None = None,
    new_residual: torch.Tensor | None = None,
) -> torch.Tensor:
    require_triton()
    x = x.contiguous()
    key = (*weight.shape, silu, norm is not None, x.dtype, x.device)
    config = _CHOSEN.get(key)
    if config is None:
        config = _choose(key, x, weight, bias, silu, residual, norm)
    return _run(config, x, weight, bias, silu, residual, norm, new_residual)


def _run(
    config: Any,
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    silu: bool,
    residual: torch.Tensor | None,
    norm: tuple[torch.Tensor, float] | None,
    new_residual: torch.Tensor | None,
) -> torch.Tensor:
    n, k = weight.shape
    y = torch.empty(1, n, dtype=x.dtype, device=x.device)
    norm_weight, eps = norm if norm is not None else (y, 0.0)
    use_pdl = pdl.enabled(x.device)
    _gemv_kernel[(triton.cdiv(n, config.kwargs["BLOCK_N"]),)](
        x,
        weight,
        bias if bias is not None else y,
        y,
        residual if residual is not None else y,
        norm_weight,
        new_residual if new_residual is not None else y,
        n,
        k,
        weight.stride(0),
        eps,
        HAS_BIAS=bias is not None,
        SILU=silu,
        NORM=norm is not None,
        HAS_RES=residual is not None,
        USE_PDL=use_pdl,
        launch_pdl=use_pdl,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
        **config.kwargs,
    )
    return y


def _choose(
    key: tuple[Any, ...],
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    silu: bool,
    residual: torch.Tensor | None,
    norm: tuple[torch.Tensor, float] | None,
) -> Any:
    """Time every configuration on copies of this call's arguments; remember the fastest."""
    if torch.cuda.is_current_stream_capturing():  # no timing inside a capture: a safe default
        log.warning(
            "GEMV %s first called inside a CUDA-graph capture: untuned configuration", key[:2]
        )
        return _CONFIGS[0]
    scratch = torch.empty_like(residual) if residual is not None else None

    def launch(config: Any, w: torch.Tensor) -> None:
        _run(config, x, w, bias, silu, residual, norm, scratch)

    _CHOSEN[key] = config = gemv_tuning.fastest_over_copies(_CONFIGS, weight, launch)
    return config


def gemv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [1, K] @ weight[N, K].T (+ bias) -> [1, N]."""
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(f"x has {x.shape[-1]} features, weight expects {weight.shape[1]}")
    return _launch(x, weight, bias)


def gemv_silu(gate_up: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """(silu(gate) * up) @ weight.T for gate_up [1, 2K] = [gate | up] and weight [N, K]."""
    if gate_up.shape[-1] != 2 * weight.shape[1]:
        raise ValueError(
            f"gate_up has {gate_up.shape[-1]} features, weight expects 2 x {weight.shape[1]}"
        )
    return _launch(gate_up, weight, None, silu=True)


def gemv_rms_norm(
    hidden: torch.Tensor,
    residual: torch.Tensor | None,
    norm_weight: torch.Tensor,
    eps: float,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """linear(rms_norm(hidden [+ residual])) in one kernel, for hidden [1, K].

    Returns (y, the new residual): hidden + residual in a new tensor (the input residual is read
    by every program, so it is not updated in place as `rms_norm` does), or hidden itself."""
    if hidden.shape[-1] != weight.shape[1] or norm_weight.shape != (weight.shape[1],):
        raise ValueError(
            f"hidden {tuple(hidden.shape)}, norm {tuple(norm_weight.shape)} and weight "
            f"{tuple(weight.shape)} disagree"
        )
    if residual is not None:
        residual = residual.contiguous()
    new_residual = torch.empty_like(hidden) if residual is not None else hidden
    y = _launch(
        hidden, weight, bias, residual=residual, norm=(norm_weight, eps), new_residual=new_residual
    )
    return y, new_residual


# the engine's switch, read at every call; graphs captured before a change keep the old path
ENABLED = True
