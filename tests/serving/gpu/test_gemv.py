"""The one-token GEMV (serving/kernels/gemv.py) against an fp32 product of the same bf16 inputs,
and against cuBLAS: layer shapes of SmolLM2-135M and Qwen3-4B, odd sizes that leave partial
blocks, bias, the SiLU-and-mul prologue; and the engine's forward with and without it."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from serving.kernels.fused_ops import rms_norm, silu_and_mul
from serving.kernels.gemv import gemv, gemv_applies, gemv_rms_norm, gemv_silu

SHAPES = [
    (960, 576),
    (3072, 576),
    (576, 1536),
    (6144, 2560),
    (2560, 4096),
    (19456, 2560),
    (2560, 9728),
    (1037, 1999),
    (4097, 513),
]


def _ulp_bound(ref: torch.Tensor) -> torch.Tensor:
    # one bf16 rounding of the result (2^-8 relative) plus the fp32 summation-order noise
    return ref.abs() * 2.0**-7 + 1e-3


@pytest.mark.parametrize("n,k", SHAPES)
@pytest.mark.parametrize("bias", [False, True])
def test_gemv_matches_fp32_product(n, k, bias):
    g = torch.Generator(device="cuda").manual_seed(n * 7 + k)
    w = torch.randn(n, k, device="cuda", generator=g).to(torch.bfloat16) * 0.05
    x = torch.randn(1, k, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(n, device="cuda", generator=g).to(torch.bfloat16) if bias else None
    ref = x.float() @ w.float().T + (b.float() if bias else 0)
    out = gemv(x, w, b)
    assert out.shape == (1, n) and out.dtype == torch.bfloat16
    assert ((out.float() - ref).abs() <= _ulp_bound(ref)).all()
    cublas = F.linear(x, w, b).float()
    # no worse than cuBLAS, which rounds once from fp32 as well
    assert (out.float() - ref).abs().mean() <= 1.5 * (cublas - ref).abs().mean() + 1e-6


@pytest.mark.parametrize("n,k", [(576, 1536), (2560, 9728), (1001, 777)])
def test_gemv_silu_matches_silu_and_mul_then_linear(n, k):
    g = torch.Generator(device="cuda").manual_seed(k)
    w = torch.randn(n, k, device="cuda", generator=g).to(torch.bfloat16) * 0.05
    gate_up = torch.randn(1, 2 * k, device="cuda", generator=g).to(torch.bfloat16) * 3
    act = silu_and_mul(gate_up)
    ref = act.float() @ w.float().T
    out = gemv_silu(gate_up, w)
    assert ((out.float() - ref).abs() <= _ulp_bound(ref)).all()


@pytest.mark.parametrize("n,k", [(960, 576), (6144, 2560), (19456, 2560), (1001, 777)])
@pytest.mark.parametrize("with_residual", [False, True])
def test_gemv_rms_norm_matches_rms_norm_then_linear(n, k, with_residual):
    g = torch.Generator(device="cuda").manual_seed(n + k)
    w = torch.randn(n, k, device="cuda", generator=g).to(torch.bfloat16) * 0.05
    norm_w = (1 + 0.1 * torch.randn(k, device="cuda", generator=g)).to(torch.bfloat16)
    hidden = torch.randn(1, k, device="cuda", generator=g).to(torch.bfloat16) * 4
    residual = (
        torch.randn(1, k, device="cuda", generator=g).to(torch.bfloat16) if with_residual else None
    )
    kept = None if residual is None else residual.clone()
    y, new_residual = gemv_rms_norm(hidden, residual, norm_w, 1e-6, w)
    ref_res = None if residual is None else kept.clone()
    x = rms_norm(hidden, norm_w, 1e-6, residual=ref_res)  # updates ref_res in place
    if with_residual:
        assert torch.equal(new_residual, ref_res)  # the bf16 sum, bit for bit
        assert torch.equal(residual, kept)  # the input residual is left as it was
    else:
        assert new_residual is hidden
    ref = x.float() @ w.float().T
    assert ((y.float() - ref).abs() <= _ulp_bound(ref) * 2).all()


def test_applies_only_to_one_token_and_large_16bit_weights():
    w = torch.zeros(2048, 1024, device="cuda", dtype=torch.bfloat16)
    assert gemv_applies(torch.zeros(1, 1024, device="cuda", dtype=torch.bfloat16), w)
    assert not gemv_applies(torch.zeros(2, 1024, device="cuda", dtype=torch.bfloat16), w)
    assert not gemv_applies(torch.zeros(1, 1024, device="cuda", dtype=torch.float32), w.float())
    assert not gemv_applies(
        torch.zeros(1, 64, device="cuda", dtype=torch.bfloat16),
        torch.zeros(64, 64, device="cuda", dtype=torch.bfloat16),
    )
    with pytest.raises(ValueError, match="features"):
        gemv(torch.zeros(1, 1000, device="cuda", dtype=torch.bfloat16), w)


def test_engine_batch1_gemv_decode_scores_like_cublas_prefill():
    """Greedy decode of random SmolLM2- and Qwen3-0.6B-shaped models at batch 1 (projections as
    GEMVs, replayed from graphs) against the same tokens scored teacher-forced by a prefill (cuBLAS
    GEMMs). Near-uniform random logits tie often, so the check is on logprobs, not on a second
    greedy run's tokens."""
    from serving.engine import build_engine
    from serving.engine.config import EngineConfig
    from serving.loader.random_weights import random_loaded
    from serving.sampling_params import SamplingParams
    from vigil.devtools.model_shapes import SHAPES as MODEL_SHAPES

    def run(engine, rid, ids, params):
        engine.add_request(rid, ids, params)
        while engine.has_unfinished_requests():
            for out in engine.step():
                if out.finished:
                    return out

    for name in ("smollm2-135m", "qwen3-0.6b"):
        shape = MODEL_SHAPES[name]
        cfg = EngineConfig(
            device="cuda",
            dtype="bfloat16",
            block_size=16,
            num_kv_blocks=64,
            max_num_seqs=1,
            enable_prefix_caching=False,
        )
        engine = build_engine(cfg, loaded=random_loaded(shape, seed=3, device="cuda"))
        prompt = torch.randint(
            0, shape["vocab_size"], (32,), generator=torch.Generator().manual_seed(0)
        ).tolist()
        decoded = run(
            engine,
            "d",
            prompt,
            SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True, logprobs=0),
        ).outputs[0]
        full = prompt + list(decoded.token_ids)
        scored = run(
            engine,
            "s",
            full,
            SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True, prompt_logprobs=0),
        )
        gemv_lp = torch.tensor([t.logprob for t in decoded.logprobs])
        prefill_lp = torch.tensor([t.logprob for t in scored.prompt_logprobs[len(prompt) :]])
        diffs = (gemv_lp - prefill_lp).abs()
        assert diffs.max() < 0.25 and diffs.mean() < 0.05, (name, diffs)


@pytest.mark.parametrize("n,k,silu", [(960, 576, False), (2560, 4096, False), (576, 1536, True)])
def test_every_candidate_configuration_matches_the_product(n, k, silu):
    """The tuner may pick any candidate: each one must compute the product."""
    from serving.kernels import gemv as gemv_module

    g = torch.Generator(device="cuda").manual_seed(n + 3 * k)
    w = torch.randn(n, k, device="cuda", generator=g).to(torch.bfloat16) * 0.05
    x = torch.randn(1, 2 * k if silu else k, device="cuda", generator=g).to(torch.bfloat16)
    ref = (silu_and_mul(x) if silu else x).float() @ w.float().T
    for config in gemv_module._CONFIGS:
        out = gemv_module._run(config, x, w, None, silu, None, None, None)
        assert ((out.float() - ref).abs() <= _ulp_bound(ref)).all(), config


def test_a_shape_is_tuned_once_and_keeps_its_configuration(monkeypatch):
    from serving.kernels import gemv as gemv_module
    from serving.kernels import gemv_tuning

    n, k = 1234, 4321  # a shape no other test tunes
    x = torch.randn(1, k, device="cuda").to(torch.bfloat16)
    w = torch.randn(n, k, device="cuda").to(torch.bfloat16) * 0.05
    calls = []
    real = gemv_tuning.fastest
    monkeypatch.setattr(
        gemv_tuning, "fastest", lambda configs, chain: calls.append(1) or real(configs, chain)
    )
    first = gemv(x, w)
    second = gemv(x, w)
    assert len(calls) == 1
    key = (n, k, False, False, torch.bfloat16, x.device)
    assert gemv_module._CHOSEN[key] in gemv_module._CONFIGS
    assert torch.equal(first, second)  # one configuration: the same bits every call


def test_fastest_picks_the_cheaper_chain_and_skips_failing_configurations():
    from serving.kernels import gemv_tuning

    src = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)

    def chain(copies: int) -> None:
        if copies == 0:
            raise RuntimeError("does not fit this device")
        for _ in range(copies):
            dst.copy_(src)

    assert gemv_tuning.fastest([8, 0, 1, 4], chain) == 1
    with pytest.raises(RuntimeError, match="no GEMV configuration"):
        gemv_tuning.fastest([0], chain)
    assert gemv_tuning.copies_for(1 << 20, src.device) >= 2
    assert gemv_tuning.copies_for(16 << 30, src.device) == 1  # past the L2 many times: no copy
