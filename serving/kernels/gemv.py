"""Matrix-vector product for one decode token: y = x @ W.T (+ b), W [N, K] row-major.

At M = 1 cuBLAS picks split-K GEMM kernels that reach about 63 % of HBM bandwidth on an H200
for the Qwen3-4B layer shapes (bench/results/profile_step.md); a decode step at batch 1 is all
weight reads, so that share is the step's speed. Here each program streams BLOCK_N whole rows
of W (coalesced along K) against x held in registers, accumulates in fp32 and rounds once,
as cuBLAS does; configurations are autotuned per (N, K) on first use, which the CUDA-graph
warm-up runs before capture.

`gemv_silu` reads x as silu(gate) * up from a [gate | up] row, rounded like
`fused_ops.silu_and_mul` (bf16 silu, then the bf16 product), so the MLP's down projection needs
no separate activation kernel.

Kernel files must not use `from __future__ import annotations` (see _compat.py).
"""

import torch

from serving.kernels._compat import HAS_TRITON, require_triton, tl, triton


def _gemv_body(x_ptr, w_ptr, b_ptr, y_ptr, N, K, stride_w, HAS_BIAS: tl.constexpr, SILU: tl.constexpr,
               BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    cols = tl.arange(0, BLOCK_K)
    w_rows = w_ptr + rows[:, None].to(tl.int64) * stride_w
    acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + cols
        k_mask = k < K
        if SILU:
            g = tl.load(x_ptr + k, mask=k_mask, other=0.0).to(tl.float32)
            u = tl.load(x_ptr + K + k, mask=k_mask, other=0.0)
            act = (g / (1.0 + tl.exp(-g))).to(u.dtype)
            x = (act.to(tl.float32) * u.to(tl.float32)).to(u.dtype).to(tl.float32)
        else:
            x = tl.load(x_ptr + k, mask=k_mask, other=0.0).to(tl.float32)
        w = tl.load(w_rows + k[None, :], mask=row_mask[:, None] & k_mask[None, :], other=0.0,
                    eviction_policy="evict_first")
        acc += w.to(tl.float32) * x[None, :]
    y = tl.sum(acc, axis=1)
    if HAS_BIAS:
        y += tl.load(b_ptr + rows, mask=row_mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + rows, y.to(y_ptr.dtype.element_ty), mask=row_mask)


if HAS_TRITON:  # pragma: no cover - GPU machine
    _CONFIGS = [
        triton.Config({"BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=s)
        for bn, bk, w, s in [
            (4, 512, 4, 3), (8, 256, 4, 3), (8, 512, 4, 3), (8, 512, 8, 3),
            (16, 256, 8, 3), (16, 512, 8, 2), (2, 1024, 4, 3), (4, 1024, 8, 3),
        ]
    ]
    _gemv_kernel = triton.autotune(configs=_CONFIGS, key=["N", "K", "SILU"])(triton.jit(_gemv_body))
else:
    _gemv_kernel = triton.jit(_gemv_body)

# where the kernel pays: one token, a 16-bit weight big enough that bandwidth is the cost
_MIN_WEIGHT_ELEMENTS = 1 << 20


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


def _launch(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, silu: bool) -> torch.Tensor:
    require_triton()
    n, k = weight.shape
    x = x.contiguous()
    y = torch.empty(1, n, dtype=x.dtype, device=x.device)
    _gemv_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK_N"]),)](
        x, weight, bias if bias is not None else y, y, n, k, weight.stride(0),
        HAS_BIAS=bias is not None, SILU=silu,
    )
    return y


def gemv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [1, K] @ weight[N, K].T (+ bias) -> [1, N]."""
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(f"x has {x.shape[-1]} features, weight expects {weight.shape[1]}")
    return _launch(x, weight, bias, silu=False)


def gemv_silu(gate_up: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """(silu(gate) * up) @ weight.T for gate_up [1, 2K] = [gate | up] and weight [N, K]."""
    if gate_up.shape[-1] != 2 * weight.shape[1]:
        raise ValueError(f"gate_up has {gate_up.shape[-1]} features, weight expects 2 x {weight.shape[1]}")
    return _launch(gate_up, weight, None, silu=True)


# the engine's switch, read at every call; graphs captured before a change keep the old path
ENABLED = True


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear, through `gemv` where it applies."""
    if ENABLED and gemv_applies(x, weight):
        return gemv(x, weight, bias)
    return torch.nn.functional.linear(x, weight, bias)
