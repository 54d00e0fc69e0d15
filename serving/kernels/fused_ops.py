"""Fused elementwise kernels for the decoder layer: RMSNorm(+residual add), SiLU-and-mul, rotary.

Each replaces several eager torch launches with one, and reproduces HF transformers' rounding
order (bf16 residual sum, fp32 normalisation cast back before the weight multiply, bf16 silu
before the product, bf16 products before the rotary sum) so greedy tokens stay identical.
Whether they pay is measured by bench/suites/bench_kernels.py (figures in bench/results/kernels.md).
"""

import torch

from serving.kernels import pdl
from serving.kernels._compat import require_triton, tl, triton
from serving.kernels.pdl import launch_next, wait_for_prior


@triton.jit
def _rms_norm_kernel(  # type: ignore[no-untyped-def]  # Triton kernel
    x_ptr,
    res_ptr,
    w_ptr,
    out_ptr,
    x_stride_t,
    x_stride_h,
    res_stride,
    num_heads,
    n_cols,
    eps,
    HAS_RES: tl.constexpr,
    BLOCK: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    launch_next(USE_PDL)
    wait_for_prior(USE_PDL)
    # row r is (token r // num_heads, head r % num_heads): per-head q/k norms read a fused qkv view
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + (row // num_heads) * x_stride_t + (row % num_heads) * x_stride_h
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_row + offs, mask=mask, other=0.0)
    if HAS_RES:
        r = tl.load(res_ptr + row * res_stride + offs, mask=mask, other=0.0)
        x = (x.to(tl.float32) + r.to(tl.float32)).to(x_ptr.dtype.element_ty)
        tl.store(res_ptr + row * res_stride + offs, x, mask=mask)
    xf = x.to(tl.float32)
    var = tl.sum(xf * xf, 0) / n_cols
    normed = (xf * tl.rsqrt(var + eps)).to(x_ptr.dtype.element_ty)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0)
    y = normed.to(tl.float32) * w.to(tl.float32)
    tl.store(out_ptr + row * n_cols + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(
    x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None
) -> torch.Tensor:
    """HF RMSNorm over the last dim, into a new contiguous tensor of x's shape.

    x is [tokens, n] or [tokens, heads, n] (per-head q/k norms; a strided view of a fused qkv is
    read in place), last dim contiguous. With `residual` (contiguous, x's shape): residual <- x +
    residual in place, and the norm of that sum is returned (the fused add + norm of a layer).
    """
    require_triton()
    n = x.shape[-1]
    if weight.shape != (n,):
        raise ValueError(f"weight must be [{n}], got {tuple(weight.shape)}")
    if x.dim() not in (2, 3) or x.stride(-1) != 1:
        raise ValueError(
            f"x must be [tokens, (heads,) n] with a contiguous last dim, got {tuple(x.shape)}"
        )
    heads = x.shape[1] if x.dim() == 3 else 1
    stride_h = x.stride(1) if x.dim() == 3 else 0
    if residual is not None and (residual.shape != x.shape or not residual.is_contiguous()):
        raise ValueError("residual must be contiguous with x's shape")
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    rows = x.shape[0] * heads
    if rows:
        block = triton.next_power_of_2(n)
        use_pdl = pdl.enabled(x.device)
        _rms_norm_kernel[(rows,)](
            x,
            residual if residual is not None else x,
            weight,
            out,
            x.stride(0),
            stride_h,
            n,
            heads,
            n,
            eps,
            HAS_RES=residual is not None,
            BLOCK=block,
            USE_PDL=use_pdl,
            num_warps=min(16, max(1, block // 256)),
            launch_pdl=use_pdl,
        )
    return out


@triton.jit
def _silu_mul_kernel(  # type: ignore[no-untyped-def]  # Triton kernel
    gate_ptr,
    up_ptr,
    out_ptr,
    g_stride,
    u_stride,
    o_stride,
    n_cols,
    BLOCK: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    launch_next(USE_PDL)
    wait_for_prior(USE_PDL)
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_cols
    g = tl.load(gate_ptr + row * g_stride + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up_ptr + row * u_stride + offs, mask=mask, other=0.0)
    act = (g / (1.0 + tl.exp(-g))).to(u.dtype)
    y = act.to(tl.float32) * u.to(tl.float32)
    tl.store(out_ptr + row * o_stride + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(gate: torch.Tensor, up: torch.Tensor | None = None) -> torch.Tensor:
    """silu(gate) * up. With one argument it is split in half on the last dim ([gate | up])."""
    require_triton()
    if up is None:
        half = gate.shape[-1] // 2
        gate, up = gate[..., :half], gate[..., half:]
    if gate.shape != up.shape:
        raise ValueError(f"gate {tuple(gate.shape)} and up {tuple(up.shape)} differ")
    n = gate.shape[-1]
    g2, u2 = gate.reshape(-1, n), up.reshape(-1, n)
    if g2.stride(-1) != 1 or u2.stride(-1) != 1:
        g2, u2 = g2.contiguous(), u2.contiguous()
    out = torch.empty(g2.shape, dtype=up.dtype, device=up.device)
    if g2.shape[0]:
        block = 1024
        grid = (g2.shape[0], triton.cdiv(n, block))
        use_pdl = pdl.enabled(up.device)
        _silu_mul_kernel[grid](
            g2,
            u2,
            out,
            g2.stride(0),
            u2.stride(0),
            out.stride(0),
            n,
            BLOCK=block,
            USE_PDL=use_pdl,
            num_warps=4,
            launch_pdl=use_pdl,
        )
    return out.view(up.shape)


@triton.jit
def _rotary_kernel(  # type: ignore[no-untyped-def]  # Triton kernel
    x_ptr,
    cos_ptr,
    sin_ptr,
    x_stride_t,
    x_stride_h,
    cs_stride,
    num_heads,
    HALF: tl.constexpr,
    H_PAD: tl.constexpr,
):
    t = tl.program_id(0).to(tl.int64)
    offs_h = tl.arange(0, H_PAD)
    offs = tl.arange(0, HALF)
    h_mask = offs_h < num_heads
    base = x_ptr + t * x_stride_t + offs_h[:, None] * x_stride_h + offs[None, :]
    x1 = tl.load(base, mask=h_mask[:, None], other=0.0)
    x2 = tl.load(base + HALF, mask=h_mask[:, None], other=0.0)
    c1 = tl.load(cos_ptr + t * cs_stride + offs)[None, :]
    c2 = tl.load(cos_ptr + t * cs_stride + HALF + offs)[None, :]
    s1 = tl.load(sin_ptr + t * cs_stride + offs)[None, :]
    s2 = tl.load(sin_ptr + t * cs_stride + HALF + offs)[None, :]
    # HF: x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1]: every op in the model dtype,
    # each rounded (the launch disables FMA contraction, which would skip a rounding)
    a1 = x1 * c1
    b1 = -x2 * s1
    a2 = x2 * c2
    b2 = x1 * s2
    tl.store(base, a1 + b1, mask=h_mask[:, None])
    tl.store(base + HALF, a2 + b2, mask=h_mask[:, None])


def rotary_inplace(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x [num_tokens, num_heads, head_dim] in place (HF rotate-half layout) by cos/sin
    [num_tokens, head_dim] (in x's dtype, as the model computes them). Returns x."""
    require_triton()
    t, h, d = x.shape
    if cos.shape != (t, d) or sin.shape != (t, d):
        raise ValueError(f"cos/sin must be [{t}, {d}], got {tuple(cos.shape)}, {tuple(sin.shape)}")
    if x.stride(2) != 1 or cos.stride(1) != 1 or sin.stride(0) != cos.stride(0):
        raise ValueError("rotary_inplace needs contiguous head_dim and matching cos/sin strides")
    if d & (d - 1) or d < 32:
        raise ValueError(f"rotary_inplace supports power-of-two head_dim >= 32, got {d}")
    if t:
        _rotary_kernel[(t,)](
            x,
            cos,
            sin,
            x.stride(0),
            x.stride(1),
            cos.stride(0),
            h,
            HALF=d // 2,
            H_PAD=triton.next_power_of_2(h),
            num_warps=4,
            enable_fp_fusion=False,
        )
    return x
