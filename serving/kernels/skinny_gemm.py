"""GEMM for a decode batch of a few dozen rows: y = x @ W.T, x [M, K] with M <= MAX_ROWS.

At M = 64 a decode step's GEMMs are still weight reads (64 FLOP per weight byte against the
H200's ~206 at which they turn compute-bound), and cuBLAS's picks reach 46-68 % of HBM bandwidth
on Qwen3-4B's projections (bench/results/profile_step.md). This kernel reads them no faster
(0.90-1.09x of cuBLAS at 16-64 rows, bench/results/decode_tuning.md); it pays on small models,
whose projections are launch-bound (SmolLM2: 1.1-1.3x), and where a norm or activation kernel can
be read inside it. Here a program holds all M rows of x (padded to BLOCK_M for the tensor cores)
and streams BLOCK_N whole rows of W over one of SPLIT_K contiguous ranges of K; with SPLIT_K > 1
a second kernel sums the fp32 partials and rounds once, as cuBLAS does. A `Prologue` reads the
input through an RMSNorm (with the residual add; one program writes the sum) or SiLU-and-mul,
rounded as fused_ops rounds them, so a projection on short rows needs no kernel of its own before
it. Which configuration runs a shape, cuBLAS among them, is serving/kernels/skinny_dispatch.py's
choice.

Kernel files must not use `from __future__ import annotations` (see _compat.py).
"""

from dataclasses import dataclass

import torch

from serving.kernels import pdl
from serving.kernels._compat import HAS_TRITON, tl, triton
from serving.kernels.fused_ops import rms_norm, silu_and_mul
from serving.kernels.pdl import launch_next, wait_for_prior

MIN_ROWS = 2  # one row is the GEMV's (serving/kernels/gemv.py)
# at 128 rows cuBLAS was faster on every projection measured (bench/results/decode_tuning.md)
MAX_ROWS = 64
CUBLAS = "cublas"  # the candidate that hands the shape back to torch


@triton.jit
def _row_rstd(
    x_rows, res_ptr, new_res_ptr, offs_m, m_mask, K, eps, store,
    BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, HAS_RES: tl.constexpr,
):  # fmt: skip
    """1 / RMS of each row of x (+ residual) over all K; `store` programs write the sum."""
    sq = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        xm = m_mask[:, None] & (offs_k < K)[None, :]
        h = tl.load(x_rows + offs_k[None, :], mask=xm, other=0.0)
        if HAS_RES:
            at = offs_m[:, None].to(tl.int64) * K + offs_k[None, :]
            r = tl.load(res_ptr + at, mask=xm, other=0.0)
            h = (h.to(tl.float32) + r.to(tl.float32)).to(h.dtype)
            tl.store(new_res_ptr + at, h, mask=xm & store)
        hf = h.to(tl.float32)
        sq += hf * hf
    return tl.rsqrt(tl.sum(sq, 1) / K + eps)


@triton.jit(do_not_specialize=["M"])
def _skinny_kernel(
    x_ptr,
    w_ptr,
    y_ptr,
    part_ptr,
    res_ptr,
    nw_ptr,
    new_res_ptr,
    M,
    N,
    K,
    stride_x,
    stride_w,
    stride_y,
    eps,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
    NORM: tl.constexpr,
    HAS_RES: tl.constexpr,
    SILU: tl.constexpr,
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
    rstd = tl.zeros([BLOCK_M], dtype=tl.float32)
    if NORM:
        rstd = _row_rstd(x_rows, res_ptr, new_res_ptr, offs_m, m_mask, K, eps, pid_n + pid_k == 0,
                         BLOCK_M, BLOCK_K, HAS_RES)  # fmt: skip
    for k0 in range(k_start, k_end, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_mask = offs_k < k_end
        xm = m_mask[:, None] & k_mask[None, :]
        if SILU:  # rounded as fused_ops.silu_and_mul: bf16 silu, then the bf16 product
            g = tl.load(x_rows + offs_k[None, :], mask=xm, other=0.0).to(tl.float32)
            u = tl.load(x_rows + K + offs_k[None, :], mask=xm, other=0.0)
            act = (g / (1.0 + tl.exp(-g))).to(u.dtype)
            x = (act.to(tl.float32) * u.to(tl.float32)).to(u.dtype)
        elif NORM:  # rounded as fused_ops.rms_norm: bf16 sum, bf16 normed, bf16 times the weight
            h = tl.load(x_rows + offs_k[None, :], mask=xm, other=0.0)
            if HAS_RES:
                r = tl.load(
                    res_ptr + offs_m[:, None].to(tl.int64) * K + offs_k[None, :], mask=xm, other=0.0
                )
                h = (h.to(tl.float32) + r.to(tl.float32)).to(h.dtype)
            normed = (h.to(tl.float32) * rstd[:, None]).to(h.dtype)
            nw = tl.load(nw_ptr + offs_k, mask=k_mask, other=0.0)
            x = (normed.to(tl.float32) * nw.to(tl.float32)[None, :]).to(h.dtype)
        else:
            x = tl.load(x_rows + offs_k[None, :], mask=xm, other=0.0)
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
def _sum_splits_kernel(
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
    CONFIGS: list = [CUBLAS, *_TRITON_CONFIGS]
else:
    CONFIGS = [CUBLAS]


def block_rows(m: int) -> int:
    return max(16, triton.next_power_of_2(m)) if HAS_TRITON else m


@dataclass(frozen=True)
class Prologue:
    """What the kernel computes from its input rows before the product: x itself, rms_norm(x
    [+ residual]) (the sum written to `new_residual`), or silu(gate) * up of x = [gate | up]."""

    norm: tuple[torch.Tensor, float] | None = None  # (weight, eps)
    residual: torch.Tensor | None = None
    new_residual: torch.Tensor | None = None
    silu: bool = False


PLAIN = Prologue()


def run(
    config, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, pro: Prologue = PLAIN
) -> torch.Tensor:
    """The prologue then x @ weight.T (+ bias) with one configuration; CUBLAS: the prologue's own
    kernels (`rms_norm` updating the residual in place, `silu_and_mul`) and torch's F.linear."""
    if isinstance(config, str):  # CUBLAS (a triton.Config compares only with its own kind)
        if pro.norm is not None:
            x = rms_norm(x, pro.norm[0], pro.norm[1], residual=pro.residual)
        elif pro.silu:
            x = silu_and_mul(x)
        return torch.nn.functional.linear(x, weight, bias)
    m = x.shape[0]
    n, k = weight.shape
    y = torch.empty(m, n, dtype=x.dtype, device=x.device)
    split = config.kwargs["SPLIT_K"]
    part = torch.empty(split, m, n, dtype=torch.float32, device=x.device) if split > 1 else y
    norm_weight, eps = pro.norm if pro.norm is not None else (y, 0.0)
    use_pdl = pdl.enabled(x.device)
    _skinny_kernel[(triton.cdiv(n, config.kwargs["BLOCK_N"]), split)](
        x, weight, y, part,
        pro.residual if pro.residual is not None else y, norm_weight,
        pro.new_residual if pro.new_residual is not None else y,
        m, n, k, x.stride(0), weight.stride(0), y.stride(0), eps,
        BLOCK_M=block_rows(m), NORM=pro.norm is not None, HAS_RES=pro.residual is not None,
        SILU=pro.silu, USE_PDL=use_pdl, launch_pdl=use_pdl, num_warps=config.num_warps,
        num_stages=config.num_stages, **config.kwargs,
    )  # fmt: skip
    if split > 1:
        block = 1024
        _sum_splits_kernel[(triton.cdiv(m * n, block),)](
            part, y, m, n, y.stride(0), SPLIT_K=split, BLOCK=block, USE_PDL=use_pdl,
            launch_pdl=use_pdl, num_warps=4,
        )  # fmt: skip
    if bias is not None:
        y += bias
    return y
