"""What the GEMV kernel (gemv.py) multiplies its weight rows with, chunk by chunk: x itself,
silu(gate) * up read from a [gate | up] row, or rms_norm(x [+ residual]) with the row's 1 / RMS
computed first by every program. Triton inlines these into the kernel.

Kernel files must not use `from __future__ import annotations` (see _compat.py).
"""

from serving.kernels._compat import tl, triton


@triton.jit
def row_rstd(  # type: ignore[no-untyped-def]  # Triton kernel
    x_ptr, res_ptr, new_res_ptr, K, eps, HAS_RES: tl.constexpr, BLOCK_K: tl.constexpr
):
    """1 / RMS of the (short) row x [+ residual]; program 0 stores x + residual."""
    cols = tl.arange(0, BLOCK_K)
    first = tl.program_id(0) == 0
    sq = tl.zeros([BLOCK_K], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + cols
        k_mask = k < K
        h = tl.load(x_ptr + k, mask=k_mask, other=0.0)
        if HAS_RES:
            h = (h.to(tl.float32) + tl.load(res_ptr + k, mask=k_mask, other=0.0).to(tl.float32)).to(
                h.dtype
            )
            tl.store(new_res_ptr + k, h, mask=k_mask & first)
        hf = h.to(tl.float32)
        sq += hf * hf
    return tl.rsqrt(tl.sum(sq, 0) / K + eps)


@triton.jit
def x_chunk(  # type: ignore[no-untyped-def]  # Triton kernel
    x_ptr,
    res_ptr,
    nw_ptr,
    k,
    K,
    rstd,
    SILU: tl.constexpr,
    NORM: tl.constexpr,
    HAS_RES: tl.constexpr,
):
    """The float32 activations at columns k: x, silu(gate) * up, or rms_norm(x [+ residual])."""
    k_mask = k < K
    if SILU:
        g = tl.load(x_ptr + k, mask=k_mask, other=0.0).to(tl.float32)
        u = tl.load(x_ptr + K + k, mask=k_mask, other=0.0)
        act = (g / (1.0 + tl.exp(-g))).to(u.dtype)
        x = (act.to(tl.float32) * u.to(tl.float32)).to(u.dtype).to(tl.float32)
    elif NORM:  # rounded as fused_ops.rms_norm: bf16 sum, bf16 normed, bf16 times the weight
        h = tl.load(x_ptr + k, mask=k_mask, other=0.0)
        if HAS_RES:
            h = (h.to(tl.float32) + tl.load(res_ptr + k, mask=k_mask, other=0.0).to(tl.float32)).to(
                h.dtype
            )
        normed = (h.to(tl.float32) * rstd).to(h.dtype)
        nw = tl.load(nw_ptr + k, mask=k_mask, other=0.0)
        x = (normed.to(tl.float32) * nw.to(tl.float32)).to(h.dtype).to(tl.float32)
    else:
        x = tl.load(x_ptr + k, mask=k_mask, other=0.0).to(tl.float32)
    return x
