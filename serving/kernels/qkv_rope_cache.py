"""One kernel for the attention prologue of a decoder layer, per token:

    q, k = per-head RMSNorm (Qwen3 only), then rotary (rotate-half) on q and k;
    q is written back in place into the fused qkv row; k and v go straight into their paged
    cache slot (optionally FP8 with scales).

It replaces five launches (q norm, k norm, rope q, rope k, KV write) with one, which measured
as the difference between 273 and the batch-1 target (bench/results/kernels.md, the 11:25 run).
Rounding
follows HF: norm in fp32 cast to the model dtype before the weight multiply, each rotary product
rounded before the sum.
"""

import torch

from serving.kernels import pdl
from serving.kernels._compat import require_triton, tl, triton
from serving.kernels.pdl import launch_next, wait_for_prior


@triton.jit
def _norm_rope(  # type: ignore[no-untyped-def]  # Triton kernel
    x1, x2, w1, w2, c1, s1, c2, s2, eps, HEAD_DIM: tl.constexpr, QK_NORM: tl.constexpr
):
    # every op after the fp32 norm statistics runs in the model dtype, each result rounded as in
    # torch (the launch disables FMA contraction, which would skip a rounding)
    dt = x1.dtype
    if QK_NORM:
        f1 = x1.to(tl.float32)
        f2 = x2.to(tl.float32)
        var = (tl.sum(f1 * f1, 1) + tl.sum(f2 * f2, 1)) / HEAD_DIM
        r = tl.rsqrt(var + eps)[:, None]
        x1 = (f1 * r).to(dt) * w1
        x2 = (f2 * r).to(dt) * w2
    o1 = x1 * c1 + -x2 * s1
    o2 = x2 * c2 + x1 * s2
    return o1, o2


@triton.jit
def _qkv_rope_cache_kernel(  # type: ignore[no-untyped-def]  # Triton kernel
    qkv_ptr,
    cos_ptr,
    sin_ptr,
    qw_ptr,
    kw_ptr,
    k_cache_ptr,
    v_cache_ptr,
    slot_ptr,
    qkv_stride,
    cs_stride,
    eps,
    k_inv_scale,
    v_inv_scale,
    NUM_Q: tl.constexpr,
    NUM_KV: tl.constexpr,
    QH_PAD: tl.constexpr,
    KH_PAD: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    QK_NORM: tl.constexpr,
    FP8: tl.constexpr,
    HALF: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    launch_next(USE_PDL)
    wait_for_prior(USE_PDL)
    t = tl.program_id(0).to(tl.int64)
    row = qkv_ptr + t * qkv_stride
    offs = tl.arange(0, HALF)
    c1 = tl.load(cos_ptr + t * cs_stride + offs)[None, :]
    c2 = tl.load(cos_ptr + t * cs_stride + HALF + offs)[None, :]
    s1 = tl.load(sin_ptr + t * cs_stride + offs)[None, :]
    s2 = tl.load(sin_ptr + t * cs_stride + HALF + offs)[None, :]
    # placeholders when there is no q/k norm (unused then)
    qw1 = c1
    qw2 = c1
    kw1 = c1
    kw2 = c1
    if QK_NORM:
        qw1 = tl.load(qw_ptr + offs)[None, :]
        qw2 = tl.load(qw_ptr + HALF + offs)[None, :]
        kw1 = tl.load(kw_ptr + offs)[None, :]
        kw2 = tl.load(kw_ptr + HALF + offs)[None, :]

    # q: heads 0..NUM_Q-1, rotated in place
    qh = tl.arange(0, QH_PAD)
    qm = (qh < NUM_Q)[:, None]
    q_ptrs = row + qh[:, None] * HEAD_DIM + offs[None, :]
    q1 = tl.load(q_ptrs, mask=qm, other=0.0)
    q2 = tl.load(q_ptrs + HALF, mask=qm, other=0.0)
    q1, q2 = _norm_rope(q1, q2, qw1, qw2, c1, s1, c2, s2, eps, HEAD_DIM, QK_NORM)
    tl.store(q_ptrs, q1, mask=qm)
    tl.store(q_ptrs + HALF, q2, mask=qm)

    slot = tl.load(slot_ptr + t).to(tl.int64)
    if slot >= 0:
        kh = tl.arange(0, KH_PAD)
        km = (kh < NUM_KV)[:, None]
        k_ptrs = row + NUM_Q * HEAD_DIM + kh[:, None] * HEAD_DIM + offs[None, :]
        k1 = tl.load(k_ptrs, mask=km, other=0.0)
        k2 = tl.load(k_ptrs + HALF, mask=km, other=0.0)
        k1, k2 = _norm_rope(k1, k2, kw1, kw2, c1, s1, c2, s2, eps, HEAD_DIM, QK_NORM)
        v_ptrs = k_ptrs + NUM_KV * HEAD_DIM
        v1 = tl.load(v_ptrs, mask=km, other=0.0)
        v2 = tl.load(v_ptrs + HALF, mask=km, other=0.0)
        if FP8:
            k1 = tl.minimum(tl.maximum(k1.to(tl.float32) * k_inv_scale, -448.0), 448.0)
            k2 = tl.minimum(tl.maximum(k2.to(tl.float32) * k_inv_scale, -448.0), 448.0)
            v1 = tl.minimum(tl.maximum(v1.to(tl.float32) * v_inv_scale, -448.0), 448.0)
            v2 = tl.minimum(tl.maximum(v2.to(tl.float32) * v_inv_scale, -448.0), 448.0)
        cdt = k_cache_ptr.dtype.element_ty
        c_ptrs = slot * (NUM_KV * HEAD_DIM) + kh[:, None] * HEAD_DIM + offs[None, :]
        tl.store(k_cache_ptr + c_ptrs, k1.to(cdt), mask=km)
        tl.store(k_cache_ptr + c_ptrs + HALF, k2.to(cdt), mask=km)
        tl.store(v_cache_ptr + c_ptrs, v1.to(cdt), mask=km)
        tl.store(v_cache_ptr + c_ptrs + HALF, v2.to(cdt), mask=km)


def qkv_rope_cache(
    qkv: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    num_q_heads: int,
    num_kv_heads: int,
    head_dim: int,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    q_norm_weight: torch.Tensor | None = None,
    k_norm_weight: torch.Tensor | None = None,
    eps: float = 1e-6,
    k_scale: float = 1.0,
    v_scale: float = 1.0,
) -> torch.Tensor:
    """Apply (norm +) rotary to q in place in `qkv` [T, (Hq + 2 Hkv) * D] and write k, v into the
    caches at slot_mapping (-1: skip). Returns q as a [T, Hq, D] view of qkv."""
    require_triton()
    t = qkv.shape[0]
    if qkv.dim() != 2 or qkv.shape[1] != (num_q_heads + 2 * num_kv_heads) * head_dim:
        raise ValueError(f"qkv must be [tokens, {(num_q_heads + 2 * num_kv_heads) * head_dim}]")
    if qkv.stride(1) != 1 or cos.stride(1) != 1 or sin.stride(0) != cos.stride(0):
        raise ValueError("qkv and cos/sin need a contiguous last dim and matching cos/sin strides")
    if head_dim & (head_dim - 1) or head_dim < 32:
        raise ValueError(f"qkv_rope_cache supports power-of-two head_dim >= 32, got {head_dim}")
    if (q_norm_weight is None) != (k_norm_weight is None):
        raise ValueError("pass both q and k norm weights, or neither")
    if not k_cache.is_contiguous() or k_cache.shape[-2:] != (num_kv_heads, head_dim):
        raise ValueError(f"k_cache must be contiguous [..., {num_kv_heads}, {head_dim}]")
    qk_norm = q_norm_weight is not None
    if t:
        use_pdl = pdl.enabled(qkv.device)
        _qkv_rope_cache_kernel[(t,)](
            qkv,
            cos,
            sin,
            q_norm_weight if qk_norm else cos,
            k_norm_weight if qk_norm else cos,
            k_cache,
            v_cache,
            slot_mapping,
            qkv.stride(0),
            cos.stride(0),
            eps,
            1.0 / k_scale,
            1.0 / v_scale,
            NUM_Q=num_q_heads,
            NUM_KV=num_kv_heads,
            QH_PAD=triton.next_power_of_2(num_q_heads),
            KH_PAD=triton.next_power_of_2(num_kv_heads),
            HEAD_DIM=head_dim,
            QK_NORM=qk_norm,
            FP8=k_cache.dtype == torch.float8_e4m3fn,
            HALF=head_dim // 2,
            USE_PDL=use_pdl,
            num_warps=4,
            enable_fp_fusion=False,
            launch_pdl=use_pdl,
        )
    return qkv[:, : num_q_heads * head_dim].view(t, num_q_heads, head_dim)
