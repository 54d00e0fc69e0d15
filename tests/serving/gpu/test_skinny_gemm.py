"""The skinny GEMM (serving/kernels/skinny_gemm.py) against an fp32 product of the same bf16
inputs and against cuBLAS: every candidate configuration (the tuner may pick any), layer shapes of
SmolLM2-135M and Qwen3-4B, odd sizes that leave partial tiles and splits, row counts across the
padded BLOCK_M sizes, bias; the dispatch of `linear` by row count; tuning once per shape."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from serving.kernels import skinny_dispatch, skinny_gemm
from serving.kernels.fused_ops import rms_norm, silu_and_mul
from serving.kernels.linear import linear
from serving.kernels.skinny_gemm import Prologue

SHAPES = [(960, 576), (576, 1536), (6144, 2560), (2560, 9728), (1037, 1999), (4097, 513)]


def _ulp_bound(ref: torch.Tensor) -> torch.Tensor:
    # one bf16 rounding of the result (2^-8 relative) plus the fp32 summation-order noise
    return ref.abs() * 2.0**-7 + 2e-3


def _case(m: int, n: int, k: int, bias: bool = False):
    g = torch.Generator(device="cuda").manual_seed(m * 31 + n * 7 + k)
    w = torch.randn(n, k, device="cuda", generator=g).to(torch.bfloat16) * 0.05
    x = torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(n, device="cuda", generator=g).to(torch.bfloat16) if bias else None
    ref = x.float() @ w.float().T + (b.float() if bias else 0)
    return x, w, b, ref


@pytest.mark.parametrize("n,k", SHAPES)
@pytest.mark.parametrize("m", [2, 17, 33, 64])
def test_every_candidate_matches_the_fp32_product(m, n, k):
    x, w, _, ref = _case(m, n, k)
    cublas_err = (F.linear(x, w).float() - ref).abs().mean()
    for config in skinny_gemm.CONFIGS:
        out = skinny_gemm.run(config, x, w, None)
        assert out.shape == (m, n) and out.dtype == torch.bfloat16, config
        assert ((out.float() - ref).abs() <= _ulp_bound(ref)).all(), config
        # no worse than cuBLAS, which rounds once from fp32 as well
        assert (out.float() - ref).abs().mean() <= 1.5 * cublas_err + 1e-6, config


def test_bias_and_strided_rows():
    x, w, b, ref = _case(48, 2560, 4096, bias=True)
    out = skinny_dispatch.skinny_linear(x, w, b)
    assert ((out.float() - ref).abs() <= _ulp_bound(ref)).all()
    wide = torch.zeros(48, 2 * 4096, device="cuda", dtype=torch.bfloat16)
    wide[:, :4096] = x
    out2 = skinny_dispatch.skinny_linear(wide[:, :4096], w, b)  # a row stride of 8,192
    assert torch.equal(out, out2)


@pytest.mark.parametrize("m,expect", [(1, "gemv"), (64, "skinny"), (65, "cublas")])
def test_linear_dispatches_by_row_count(m, expect, monkeypatch):
    x, w, _, ref = _case(m, 2560, 2560)
    seen = []
    monkeypatch.setattr(
        skinny_dispatch,
        "skinny_linear",
        lambda *a, real=skinny_dispatch.skinny_linear: seen.append("skinny") or real(*a),
    )
    out = linear(x, w)
    assert ((out.float() - ref).abs() <= _ulp_bound(ref)).all()
    assert seen == (["skinny"] if expect == "skinny" else [])


def test_a_shape_is_tuned_once_per_row_block(monkeypatch):
    from serving.kernels import gemv_tuning

    n, k = 1234, 4321  # a shape no other test tunes
    calls = []
    real = gemv_tuning.fastest
    monkeypatch.setattr(
        gemv_tuning, "fastest", lambda configs, chain: calls.append(1) or real(configs, chain)
    )
    x, w, _, _ = _case(40, n, k)
    first = skinny_dispatch.skinny_linear(x, w)
    second = skinny_dispatch.skinny_linear(x[:33], w)  # same BLOCK_M (64): no second tuning
    assert len(calls) == 1
    assert torch.equal(first[:33], second)
    skinny_dispatch.skinny_linear(x[:16], w)  # BLOCK_M 16: tuned on its own
    assert len(calls) == 2
    key = (n, k, 64, torch.bfloat16, x.device, False, False, False)
    assert any(skinny_dispatch._CHOSEN[key] is c for c in skinny_gemm.CONFIGS)


def test_first_call_inside_a_capture_takes_cublas_untimed():
    x, w, _, _ = _case(24, 777, 1111)
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream), torch.cuda.graph(graph):
        assert skinny_dispatch.choose(x, w, None) is skinny_gemm.CUBLAS
    assert not [key for key in skinny_dispatch._CHOSEN if key[:3] == (777, 1111, 32)]


@pytest.mark.parametrize("m,k,n", [(64, 576, 960), (17, 576, 3072), (33, 1000, 700)])
@pytest.mark.parametrize("with_residual", [False, True])
def test_norm_prologue_matches_rms_norm_then_product(m, k, n, with_residual):
    """Every candidate, the norm read inside (the cuBLAS one runs rms_norm first): the product of
    fused_ops.rms_norm's bf16 output, and the new residual bit for bit."""
    g = torch.Generator(device="cuda").manual_seed(m + k + n)
    hidden = torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16)
    res = torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16)
    res = res if with_residual else None
    nw = (1 + 0.1 * torch.randn(k, device="cuda", generator=g)).to(torch.bfloat16)
    w = torch.randn(n, k, device="cuda", generator=g).to(torch.bfloat16) * 0.05
    expect_res = res.clone() if res is not None else None
    ref = rms_norm(hidden, nw, 1e-5, residual=expect_res).float() @ w.float().T
    for config in skinny_gemm.CONFIGS:
        r = res.clone() if res is not None else None
        new = torch.empty_like(hidden) if res is not None else None
        out = skinny_gemm.run(config, hidden, w, None, Prologue((nw, 1e-5), r, new))
        assert ((out.float() - ref).abs() <= _ulp_bound(ref)).all(), config
        if res is not None:
            got = r if isinstance(config, str) else new  # cuBLAS's rms_norm adds in place
            assert torch.equal(got, expect_res), config
    y, new_res = skinny_dispatch.skinny_rms_norm(hidden, res, nw, 1e-5, w)
    assert ((y.float() - ref).abs() <= _ulp_bound(ref)).all()
    assert torch.equal(new_res, expect_res if res is not None else hidden)


@pytest.mark.parametrize("m,k,n", [(64, 1536, 576), (5, 1536, 576), (40, 999, 300)])
def test_silu_prologue_matches_silu_and_mul_then_product(m, k, n):
    g = torch.Generator(device="cuda").manual_seed(m * k + n)
    gate_up = torch.randn(m, 2 * k, device="cuda", generator=g).to(torch.bfloat16)
    w = torch.randn(n, k, device="cuda", generator=g).to(torch.bfloat16) * 0.05
    ref = silu_and_mul(gate_up).float() @ w.float().T
    for config in skinny_gemm.CONFIGS:
        out = skinny_gemm.run(config, gate_up, w, None, Prologue(silu=True))
        assert ((out.float() - ref).abs() <= _ulp_bound(ref)).all(), config
    out = skinny_dispatch.skinny_silu(gate_up, w)
    assert ((out.float() - ref).abs() <= _ulp_bound(ref)).all()
