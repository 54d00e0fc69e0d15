"""The grouped expert GEMM (serving/kernels/moe_gemm.py) against the torch experts path
(serving/kernels/moe_reference.py) on the same weights, computed in float32 from the kernel's
bf16/fp16 inputs: expert counts and top-k of Qwen3-30B-A3B (128, 8) and gpt-oss-20B (32, 4, with
biases and the clamped SwiGLU) at reduced hidden sizes, one token, a token count that leaves
partial tiles, every token on one expert, experts left empty; the sorted layout equal on GPU and
CPU; the experts captured in a CUDA graph and replayed with new routing; a tiny Qwen3-MoE through
the engine (Triton experts, CUDA graphs) against transformers."""

from __future__ import annotations

import pytest
import torch

from serving.kernels.moe_activation import SILU, SWIGLU_OAI, ExpertActivation
from serving.kernels.moe_align import align_by_expert
from serving.kernels.moe_gemm import fused_experts
from serving.kernels.moe_reference import experts_reference

pytestmark = pytest.mark.gpu

# (experts, top_k, hidden, inner, activation, biases)
FAMILIES = {
    "qwen3-30b-a3b-like": (128, 8, 512, 192, ExpertActivation(SILU), False),
    "gpt-oss-20b-like": (32, 4, 576, 320, ExpertActivation(SWIGLU_OAI, 1.702, 7.0), True),
    "small-odd": (5, 2, 72, 40, ExpertActivation(SILU), False),
}


def _weights(experts, hidden, inner, bias, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)

    def rnd(*shape, scale):
        return (torch.randn(*shape, device="cuda", generator=g) * scale).to(dtype)

    w13 = rnd(experts, 2 * inner, hidden, scale=hidden**-0.5)
    w2 = rnd(experts, hidden, inner, scale=inner**-0.5)
    b13 = rnd(experts, 2 * inner, scale=0.5) if bias else None
    b2 = rnd(experts, hidden, scale=0.5) if bias else None
    return w13, w2, b13, b2


def _routing(tokens, experts, top_k, mode, dtype, seed=1):
    g = torch.Generator(device="cuda").manual_seed(seed)
    if mode == "uniform":
        scores = torch.rand(tokens, experts, device="cuda", generator=g)
    else:  # "skewed": a few hot experts take most pairs; the rest stay empty or nearly
        scores = torch.rand(tokens, experts, device="cuda", generator=g)
        scores[:, : top_k + 1] += 10.0
    ids = torch.topk(scores, top_k, dim=-1).indices
    weights = torch.softmax(torch.rand(tokens, top_k, device="cuda", generator=g), dim=-1)
    return ids, weights.to(dtype)


def _oracle(x, w13, w2, ids, weights, act, b13, b2):
    def up(t):
        return None if t is None else t.float()

    return experts_reference(
        x.float(), w13.float(), w2.float(), ids, weights.float(), act, up(b13), up(b2)
    )


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("tokens", [1, 7, 64, 333])
@pytest.mark.parametrize("mode", ["uniform", "skewed"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_grouped_gemm_matches_the_torch_experts(family, tokens, mode, dtype):
    experts, top_k, hidden, inner, act, bias = FAMILIES[family]
    w13, w2, b13, b2 = _weights(experts, hidden, inner, bias, dtype)
    x = torch.randn(tokens, hidden, device="cuda").to(dtype)
    ids, weights = _routing(tokens, experts, top_k, mode, dtype)
    out = fused_experts(x, w13, w2, ids, weights, act, b13, b2)
    ref = _oracle(x, w13, w2, ids, weights, act, b13, b2)
    assert out.shape == (tokens, hidden) and out.dtype == dtype
    # bf16/fp16 rounding of the gate/up projection and of the result; a wrong expert, row or
    # weight moves outputs by their own magnitude
    scale = ref.abs().max()
    err = (out.float() - ref).abs()
    assert (err <= 0.02 * ref.abs() + 0.01 * scale).all(), float(err.max() / scale)


def test_float32_matches_closely():
    experts, top_k, hidden, inner, act, bias = FAMILIES["gpt-oss-20b-like"]
    w13, w2, b13, b2 = _weights(experts, hidden, inner, bias, torch.float32)
    x = torch.randn(50, hidden, device="cuda")
    ids, weights = _routing(50, experts, top_k, "uniform", torch.float32)
    out = fused_experts(x, w13, w2, ids, weights, act, b13, b2)
    ref = _oracle(x, w13, w2, ids, weights, act, b13, b2)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)


def test_every_token_on_one_expert_and_no_tokens():
    experts, top_k, hidden, inner, act, bias = FAMILIES["small-odd"]
    w13, w2, b13, b2 = _weights(experts, hidden, inner, bias, torch.bfloat16)
    x = torch.randn(40, hidden, device="cuda").to(torch.bfloat16)
    ids = torch.tensor([[3, 1]] * 40, device="cuda")
    weights = torch.full((40, 2), 0.5, device="cuda", dtype=torch.bfloat16)
    out = fused_experts(x, w13, w2, ids, weights, act)
    ref = _oracle(x, w13, w2, ids, weights, act, None, None)
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2 * float(ref.abs().max()))
    empty = fused_experts(x[:0], w13, w2, ids[:0], weights[:0], act)
    assert empty.shape == (0, hidden)


@pytest.mark.parametrize("block_m", [16, 32, 64])
def test_layout_is_the_same_on_gpu_and_cpu(block_m):
    ids, _ = _routing(97, 128, 8, "skewed", torch.float32)
    gpu = align_by_expert(ids, 128, block_m)
    cpu = align_by_expert(ids.cpu(), 128, block_m)
    for name in ("sorted_pairs", "tile_experts", "num_rows", "counts"):
        assert torch.equal(getattr(gpu, name).cpu(), getattr(cpu, name)), name


def test_captured_in_a_cuda_graph_and_replayed_with_new_routing():
    experts, top_k, hidden, inner, act, bias = FAMILIES["qwen3-30b-a3b-like"]
    w13, w2, _, _ = _weights(experts, hidden, inner, False, torch.bfloat16)
    tokens = 16
    x = torch.randn(tokens, hidden, device="cuda").to(torch.bfloat16)
    ids, weights = _routing(tokens, experts, top_k, "uniform", torch.bfloat16, seed=3)
    fused_experts(x, w13, w2, ids, weights, act)  # compile outside the capture
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fused_experts(x, w13, w2, ids, weights, act)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fused_experts(x, w13, w2, ids, weights, act)
    for seed in (4, 5):
        new_ids, new_weights = _routing(tokens, experts, top_k, "skewed", torch.bfloat16, seed)
        ids.copy_(new_ids)
        weights.copy_(new_weights)
        x.copy_(torch.randn(tokens, hidden, device="cuda").to(torch.bfloat16))
        graph.replay()
        eager = fused_experts(x, w13, w2, ids, weights, act)
        torch.testing.assert_close(out, eager, rtol=0, atol=0)


def test_tiny_qwen3_moe_engine_matches_transformers_on_gpu(tmp_path):
    from engine_fixtures import greedy, make_engine, run_to_completion
    from moe_fixtures import qwen3_moe_config, save_tiny_moe

    from serving.loader import load_model_files

    # head_dim 64: the Triton attention kernels' sizes; float32 on both sides
    hf = save_tiny_moe(tmp_path, qwen3_moe_config(head_dim=64), seed=5)
    loaded = load_model_files(tmp_path)
    engine = make_engine(loaded, device="cuda", dtype="float32", max_num_batched_tokens=64)
    assert engine.runner.gpu is not None
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, 256, (n,), generator=g).tolist() for n in (1, 9, 30, 47)]
    finals = run_to_completion(
        engine, {0: [(str(i), p, greedy(16)) for i, p in enumerate(prompts)]}
    )
    for i, p in enumerate(prompts):
        ids = torch.tensor([p])
        with torch.inference_mode():
            ref = hf.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=16, do_sample=False
            )
        assert finals[str(i)].outputs[0].token_ids == ref[0, len(p) :].tolist(), f"prompt {i}"
