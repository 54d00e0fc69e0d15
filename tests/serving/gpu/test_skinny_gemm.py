"""The skinny GEMM (serving/kernels/skinny_gemm.py) against an fp32 product of the same bf16
inputs and against cuBLAS: every candidate configuration (the tuner may pick any), layer shapes of
SmolLM2-135M and Qwen3-4B, odd sizes that leave partial tiles and splits, row counts across the
padded BLOCK_M sizes, bias; the dispatch of `linear` by row count; tuning once per shape."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from serving.kernels import skinny_gemm
from serving.kernels.linear import linear

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
    out = skinny_gemm.skinny_linear(x, w, b)
    assert ((out.float() - ref).abs() <= _ulp_bound(ref)).all()
    wide = torch.zeros(48, 2 * 4096, device="cuda", dtype=torch.bfloat16)
    wide[:, :4096] = x
    out2 = skinny_gemm.skinny_linear(wide[:, :4096], w, b)  # a row stride of 8,192
    assert torch.equal(out, out2)


@pytest.mark.parametrize("m,expect", [(1, "gemv"), (64, "skinny"), (65, "cublas")])
def test_linear_dispatches_by_row_count(m, expect, monkeypatch):
    x, w, _, ref = _case(m, 2560, 2560)
    seen = []
    monkeypatch.setattr(
        skinny_gemm,
        "skinny_linear",
        lambda *a, real=skinny_gemm.skinny_linear: seen.append("skinny") or real(*a),
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
    first = skinny_gemm.skinny_linear(x, w)
    second = skinny_gemm.skinny_linear(x[:33], w)  # same BLOCK_M (64): no second tuning
    assert len(calls) == 1
    assert torch.equal(first[:33], second)
    skinny_gemm.skinny_linear(x[:16], w)  # BLOCK_M 16: tuned on its own
    assert len(calls) == 2
    key = (n, k, 64, torch.bfloat16, x.device)
    assert any(skinny_gemm._CHOSEN[key] is c for c in skinny_gemm.CONFIGS)


def test_first_call_inside_a_capture_takes_cublas_untimed():
    x, w, _, _ = _case(24, 777, 1111)
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream), torch.cuda.graph(graph):
        assert skinny_gemm.choose(x, w, None) is skinny_gemm.CUBLAS
    assert (777, 1111, 32, torch.bfloat16, x.device) not in skinny_gemm._CHOSEN
