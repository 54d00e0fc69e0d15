"""Where the skinny GEMM (serving/kernels/skinny_gemm.py) runs, and with which configuration.

A projection of 2-64 decode rows goes through it when its weight is 16-bit and wide enough; its
configuration is chosen per (N, K, BLOCK_M, prologue) on the first call by timing every candidate
as a decode step runs it (serving/kernels/gemv_tuning.py), cuBLAS among them, so a shape where
cuBLAS times faster keeps cuBLAS. With a prologue the cuBLAS candidate runs the prologue as its
own kernel first (`rms_norm`, `silu_and_mul`), so fusing is chosen only where it times faster:
on short rows (SmolLM2's 576 and 1,536 features) one kernel fewer per projection saves a launch,
on long ones every program re-reading whole rows costs more than it saves.
"""

import logging

import torch

from serving.kernels import gemv_tuning
from serving.kernels._compat import HAS_TRITON, require_triton
from serving.kernels.skinny_gemm import (
    CONFIGS,
    CUBLAS,
    MAX_ROWS,
    MIN_ROWS,
    PLAIN,
    Prologue,
    block_rows,
    run,
)

log = logging.getLogger("vigil.kernels")

# (N, K, BLOCK_M, dtype, device, norm, residual, silu) -> the configuration chosen for it
_CHOSEN: dict[tuple, object] = {}

# the engine's switch, read at every call; graphs captured before a change keep the old path
ENABLED = True


def skinny_applies(x: torch.Tensor, weight: torch.Tensor) -> bool:
    return (
        ENABLED
        and HAS_TRITON
        and x.is_cuda
        and x.dim() == 2
        and MIN_ROWS <= x.shape[0] <= MAX_ROWS
        and weight.dtype in (torch.bfloat16, torch.float16)
        and x.dtype == weight.dtype
        and x.stride(-1) == 1
        and weight.stride(-1) == 1
        and weight.shape[0] >= 256
    )


def choose(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, pro: Prologue = PLAIN
) -> object:
    """The configuration for this call's shape: remembered, or timed now on copies of the weight
    (never inside a graph capture: cuBLAS there, untimed)."""
    key = (
        *weight.shape, block_rows(x.shape[0]), x.dtype, x.device,
        pro.norm is not None, pro.residual is not None, pro.silu,
    )  # fmt: skip
    config = _CHOSEN.get(key)
    if config is not None:
        return config
    if torch.cuda.is_current_stream_capturing():
        log.warning("GEMM %s first called inside a CUDA-graph capture: cuBLAS", key[:3])
        return CUBLAS
    copies = gemv_tuning.copies_for(weight.numel() * weight.element_size(), x.device)
    launches = [weight] + [weight.clone() for _ in range(copies - 1)]
    launches = launches * (2 if copies == 1 else 1)
    # the timed chain must not touch the caller's residual (cuBLAS's rms_norm adds in place)
    scratch = Prologue(
        pro.norm,
        pro.residual.clone() if pro.residual is not None else None,
        torch.empty_like(x) if pro.residual is not None else None,
        pro.silu,
    )

    def chain(config) -> None:
        for w in launches:
            run(config, x, w, bias, scratch)

    _CHOSEN[key] = config = gemv_tuning.fastest(CONFIGS, chain)
    log.info("GEMM %s x %s %s: %s", x.shape[0], tuple(weight.shape), key[-3:], config)
    return config


def _check(x: torch.Tensor, weight: torch.Tensor, features: int) -> None:
    require_triton()
    if features != weight.shape[1]:
        raise ValueError(f"{features} input features for a weight of {tuple(weight.shape)}")


def skinny_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """x [M, K] @ weight[N, K].T (+ bias) for MIN_ROWS <= M <= MAX_ROWS."""
    _check(x, weight, x.shape[-1])
    return run(choose(x, weight, bias), x, weight, bias)


def skinny_silu(gate_up: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """(silu(gate) * up) @ weight.T for gate_up [M, 2K] = [gate | up] and weight [N, K]."""
    _check(gate_up, weight, gate_up.shape[-1] // 2)
    pro = Prologue(silu=True)
    return run(choose(gate_up, weight, None, pro), gate_up, weight, None, pro)


def skinny_rms_norm(
    hidden: torch.Tensor,
    residual: torch.Tensor | None,
    norm_weight: torch.Tensor,
    eps: float,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """linear(rms_norm(hidden [+ residual])) and the new residual: hidden + residual (in place in
    `residual` where cuBLAS was chosen, a new tensor where the fused kernel was), or hidden."""
    _check(hidden, weight, hidden.shape[-1])
    if residual is not None and not residual.is_contiguous():
        raise ValueError("residual must be contiguous")
    config = choose(hidden, weight, bias, Prologue((norm_weight, eps), residual))
    fused = not isinstance(config, str)
    new_residual = torch.empty_like(hidden) if fused and residual is not None else residual
    pro = Prologue((norm_weight, eps), residual, new_residual)
    y = run(config, hidden, weight, bias, pro)
    return y, new_residual if new_residual is not None else hidden
