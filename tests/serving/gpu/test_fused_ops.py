"""Fused RMSNorm(+residual), SiLU-and-mul and rotary against the model's own torch ops (which
follow HF transformers' rounding order): equal, or off by one bf16 rounding on rare elements."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from serving.kernels.fused_ops import rms_norm, rotary_inplace, silu_and_mul
from serving.model.layers import RMSNorm
from serving.model.rope import apply_rope

pytestmark = pytest.mark.gpu


def _close_bf16(out: torch.Tensor, ref: torch.Tensor, max_mismatch: float = 2e-3) -> None:
    assert out.shape == ref.shape and out.dtype == ref.dtype
    diff = (out.float() - ref.float()).abs()
    # a mismatch is at most one bf16 step (2^-7 relative) and rare
    assert (diff <= ref.float().abs() * 2**-7 + 1e-6).all(), float(diff.max())
    assert (diff > 0).float().mean() <= max_mismatch


@pytest.mark.parametrize("n", [576, 2560, 128])
@pytest.mark.parametrize("tokens", [1, 37, 256])
def test_rms_norm_with_and_without_residual(n, tokens):
    g = torch.Generator(device="cuda").manual_seed(n + tokens)
    x = torch.randn(tokens, n, device="cuda", generator=g).bfloat16()
    res = torch.randn(tokens, n, device="cuda", generator=g).bfloat16()
    norm = RMSNorm(n, 1e-6).cuda().bfloat16()
    norm.weight.data = (1 + 0.1 * torch.randn(n, device="cuda", generator=g)).bfloat16()
    _close_bf16(rms_norm(x, norm.weight, 1e-6), norm(x))
    summed = res + x  # HF: residual + hidden, rounded to bf16
    res_in = res.clone()
    out = rms_norm(x, norm.weight, 1e-6, residual=res_in)
    assert torch.equal(res_in, summed)
    _close_bf16(out, norm(summed))


def test_rms_norm_per_head_on_strided_qkv_view():
    g = torch.Generator(device="cuda").manual_seed(0)
    t, hq, hk, d = 19, 16, 8, 128
    qkv = torch.randn(t, (hq + 2 * hk) * d, device="cuda", generator=g).bfloat16()
    q = qkv[:, : hq * d].view(t, hq, d)
    norm = RMSNorm(d, 1e-6).cuda().bfloat16()
    norm.weight.data = torch.rand(d, device="cuda", generator=g).bfloat16()
    _close_bf16(rms_norm(q, norm.weight, 1e-6), norm(q))


@pytest.mark.parametrize("inter", [1536, 9728])
def test_silu_and_mul(inter):
    g = torch.Generator(device="cuda").manual_seed(inter)
    gu = (torch.randn(33, 2 * inter, device="cuda", generator=g) * 4).bfloat16()
    gate, up = gu.split(inter, dim=-1)
    _close_bf16(silu_and_mul(gu), F.silu(gate) * up)


@pytest.mark.parametrize("heads,d", [(9, 64), (32, 128), (8, 128)])
def test_rotary_inplace_matches_model_rope(heads, d):
    g = torch.Generator(device="cuda").manual_seed(heads)
    t = 50
    x = torch.randn(t, heads, d, device="cuda", generator=g).bfloat16()
    pos = torch.randint(0, 30000, (t,), device="cuda", generator=g)
    inv = 1.0 / (1e6 ** (torch.arange(0, d, 2, device="cuda").float() / d))
    freqs = pos.float()[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().bfloat16(), emb.sin().bfloat16()
    ref = apply_rope(x, cos, sin)
    # as a strided view of a wider buffer, rotated in place
    wide = torch.zeros(t, heads * d + 64, device="cuda", dtype=torch.bfloat16)
    view = wide[:, : heads * d].view(t, heads, d)
    view.copy_(x)
    rotary_inplace(view, cos, sin)
    _close_bf16(view, ref)
    assert (wide[:, heads * d :] == 0).all()


@pytest.mark.parametrize(
    "hq,hk,d,qk_norm", [(9, 3, 64, False), (32, 8, 128, True), (16, 8, 128, True)]
)
@pytest.mark.parametrize("cache_dtype", [torch.bfloat16, torch.float8_e4m3fn])
def test_qkv_rope_cache_matches_separate_ops(hq, hk, d, qk_norm, cache_dtype):
    """One kernel == q/k norm + rope (the model's torch ops) + the KV write, on a fused qkv."""
    from serving.kernels.kv_write import write_kv
    from serving.kernels.qkv_rope_cache import qkv_rope_cache

    g = torch.Generator(device="cuda").manual_seed(hq + d)
    t, nb, bs = 45, 16, 16
    qkv = torch.randn(t, (hq + 2 * hk) * d, device="cuda", generator=g).bfloat16()
    pos = torch.randint(0, 5000, (t,), device="cuda", generator=g)
    inv = 1.0 / (1e6 ** (torch.arange(0, d, 2, device="cuda").float() / d))
    emb = torch.cat([pos.float()[:, None] * inv] * 2, dim=-1)
    cos, sin = emb.cos().bfloat16(), emb.sin().bfloat16()
    qn, kn = RMSNorm(d, 1e-6).cuda().bfloat16(), RMSNorm(d, 1e-6).cuda().bfloat16()
    qn.weight.data = torch.rand(d, device="cuda", generator=g).bfloat16()
    kn.weight.data = torch.rand(d, device="cuda", generator=g).bfloat16()
    q, k, v = qkv.split([hq * d, hk * d, hk * d], dim=-1)
    q, k, v = q.reshape(t, hq, d), k.reshape(t, hk, d), v.reshape(t, hk, d)
    if qk_norm:
        q, k = qn(q), kn(k)
    ref_q, ref_k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    slots = torch.randperm(nb * bs, device="cuda", generator=g)[:t]
    slots[::9] = -1
    shape = (nb, bs, hk, d)
    ref_kc = torch.zeros(shape, device="cuda", dtype=cache_dtype)
    ref_vc = torch.zeros_like(ref_kc)
    write_kv(ref_k, v.contiguous(), ref_kc, ref_vc, slots, 0.5, 0.25)
    kc, vc = torch.zeros_like(ref_kc), torch.zeros_like(ref_kc)
    out_q = qkv_rope_cache(
        qkv,
        cos,
        sin,
        hq,
        hk,
        d,
        kc,
        vc,
        slots,
        qn.weight if qk_norm else None,
        kn.weight if qk_norm else None,
        1e-6,
        0.5,
        0.25,
    )
    _close_bf16(out_q, ref_q)
    if cache_dtype == torch.bfloat16:
        _close_bf16(kc, ref_kc)
        assert torch.equal(vc, ref_vc)
    else:  # same values quantised by the same conversion; a 1-ulp bf16 difference may flip one
        assert (kc.view(torch.uint8) != ref_kc.view(torch.uint8)).float().mean() < 2e-3
        assert torch.equal(vc.view(torch.uint8), ref_vc.view(torch.uint8))
