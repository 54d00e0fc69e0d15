"""The experts of a mixture-of-experts layer on the GPU: one grouped GEMM launch per projection
over the (token, slot) pairs sorted by expert (serving/kernels/moe_align.py).

Every tile of BLOCK_M sorted rows belongs to one expert, so a program loads its tile's expert id,
gathers its rows of the input (row = pair // ROW_DIV: the token for the gate/up projection, the
pair itself for the down projection), multiplies by that expert's weight and scatters the result
to the pairs' rows. The gate/up projection writes [pairs, 2I]; the gated activation runs over it;
the down projection adds its bias, multiplies by the routing weight (in fp32, rounded once) and
writes [pairs, H]; the k slots of each token are then summed. Two GEMM launches whatever the
number of experts, no host read: a CUDA graph captures it. Tiles past the padded row count exit at
once. The same math in torch, per expert, is serving/kernels/moe_reference.py, the oracle of the
GPU tests.

Kernel files must not use `from __future__ import annotations` (see _compat.py).
"""

import torch

from serving.kernels._compat import require_triton, tl, triton
from serving.kernels.moe_activation import SILU, ExpertActivation, gated_activation
from serving.kernels.moe_align import ExpertLayout, align_by_expert

GROUP_M = 8


@triton.jit(do_not_specialize=["num_pairs", "TILES_M"])
def _grouped_gemm_kernel(  # type: ignore[no-untyped-def]  # Triton kernel
    a_ptr,
    w_ptr,
    bias_ptr,
    out_ptr,
    sorted_pairs_ptr,
    tile_experts_ptr,
    num_rows_ptr,
    weights_ptr,
    num_pairs,
    N,
    K,
    TILES_M,
    stride_am,
    stride_we,
    stride_wn,
    stride_wk,
    stride_be,
    stride_om,
    ROW_DIV: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    MUL_WEIGHT: tl.constexpr,
    IEEE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP: tl.constexpr,
):
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP * tiles_n
    first_m = (pid // per_group) * GROUP
    group_size = tl.minimum(TILES_M - first_m, GROUP)
    pid_m = first_m + (pid % per_group) % group_size
    pid_n = (pid % per_group) // group_size
    if pid_m * BLOCK_M >= tl.load(num_rows_ptr):
        return
    expert = tl.load(tile_experts_ptr + pid_m).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    pairs = tl.load(sorted_pairs_ptr + offs_m)
    row_ok = pairs < num_pairs
    rows = (pairs // ROW_DIV).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * stride_am + offs_k[None, :]
    w_ptrs = (
        w_ptr
        + expert * stride_we
        + offs_n[None, :].to(tl.int64) * stride_wn
        + offs_k[:, None] * stride_wk
    )
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for step in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - step * BLOCK_K
        a = tl.load(a_ptrs, mask=row_ok[:, None] & (offs_k[None, :] < k_left), other=0.0)
        w = tl.load(w_ptrs, mask=(offs_k[:, None] < k_left) & n_ok[None, :], other=0.0)
        if IEEE:  # noqa: SIM108 (a constexpr branch) fp32 weights: IEEE products, not TF32
            acc = tl.dot(a, w, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, w, acc)
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K * stride_wk
    if HAS_BIAS:
        bias = tl.load(bias_ptr + expert * stride_be + offs_n, mask=n_ok, other=0.0)
        acc += bias.to(tl.float32)[None, :]
    if MUL_WEIGHT:
        weight = tl.load(weights_ptr + pairs, mask=row_ok, other=0.0)
        acc *= weight.to(tl.float32)[:, None]
    out_ptrs = out_ptr + pairs[:, None].to(tl.int64) * stride_om + offs_n[None, :]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & n_ok[None, :])


def pick_block_m(num_pairs: int, num_experts: int) -> int:
    """Rows per tile from the mean rows per expert: small tiles for decode (few rows each),
    larger ones for prefill (fewer padded rows and weight reads per row)."""
    mean = num_pairs / max(num_experts, 1)
    if mean <= 16:
        return 16
    return 32 if mean <= 64 else 64


def grouped_gemm(
    a: torch.Tensor,
    w: torch.Tensor,
    bias: torch.Tensor | None,
    out: torch.Tensor,
    layout: ExpertLayout,
    row_div: int,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """out[p] = (a[p // row_div] @ w[e_p].T + bias[e_p]) (* weights[p]) for every routed pair p.

    a [rows, K] (last dim contiguous), w [E, N, K], bias [E, N], out [pairs, N] contiguous,
    weights [pairs] contiguous."""
    require_triton()
    num_n, k = w.shape[1], w.shape[2]
    if a.shape[-1] != k or a.stride(-1) != 1:
        raise ValueError(f"a must be [rows, {k}] with a contiguous last dim, got {tuple(a.shape)}")
    if not out.is_contiguous() or out.shape != (layout.num_pairs, num_n):
        raise ValueError(f"out must be contiguous [{layout.num_pairs}, {num_n}]")
    if layout.num_pairs == 0:
        return out
    block_m = layout.block_m
    block_n = 64 if num_n <= 2048 else 128
    block_k = 32 if a.dtype == torch.float32 else 64
    tiles_m = layout.capacity // block_m
    grid = (tiles_m * triton.cdiv(num_n, block_n),)
    _grouped_gemm_kernel[grid](
        a,
        w,
        bias if bias is not None else w,
        out,
        layout.sorted_pairs,
        layout.tile_experts,
        layout.num_rows,
        weights if weights is not None else w,
        layout.num_pairs,
        num_n,
        k,
        tiles_m,
        a.stride(0),
        w.stride(0),
        w.stride(1),
        w.stride(2),
        bias.stride(0) if bias is not None else 0,
        out.stride(0),
        ROW_DIV=row_div,
        HAS_BIAS=bias is not None,
        MUL_WEIGHT=weights is not None,
        IEEE=a.dtype == torch.float32,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        GROUP=GROUP_M,
        num_warps=4,
        num_stages=3,
    )
    return out


def fused_experts(
    x: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    topk_ids: torch.Tensor,
    topk_weights: torch.Tensor,
    act: ExpertActivation,
    b13: torch.Tensor | None = None,
    b2: torch.Tensor | None = None,
) -> torch.Tensor:
    """The GPU counterpart of `experts_reference` (same arguments, same result within rounding):
    [T, H] -> [T, H]."""
    from serving.kernels.fused_ops import silu_and_mul

    tokens, top_k = topk_ids.shape
    num_experts, hidden = w13.shape[0], w2.shape[1]
    pairs = tokens * top_k
    layout = align_by_expert(topk_ids, num_experts, pick_block_m(pairs, num_experts))
    gate_up = torch.empty(pairs, w13.shape[1], dtype=x.dtype, device=x.device)
    grouped_gemm(x, w13, b13, gate_up, layout, row_div=top_k)
    inner = silu_and_mul(gate_up) if act.kind == SILU else gated_activation(gate_up, act)
    down = torch.empty(pairs, hidden, dtype=x.dtype, device=x.device)
    weights = topk_weights.reshape(-1).to(x.dtype).contiguous()
    grouped_gemm(inner.contiguous(), w2, b2, down, layout, row_div=1, weights=weights)
    return down.view(tokens, top_k, hidden).sum(dim=1)
