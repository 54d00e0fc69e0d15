"""The experts of a mixture-of-experts layer on the CPU, against independent oracles:

- the torch reference (sorted pairs, one matmul per expert) against a brute-force loop over
  tokens and slots in float64, over routing shapes drawn by hypothesis (one token, all tokens on
  one expert, experts left empty, top-k = E), both activations, with and without biases;
- the sorted, tile-padded layout the Triton kernel reads: every pair exactly once, every tile
  one expert, within the stated capacity; and a torch emulation of the kernel's tile loop over
  that layout equals the reference;
- the routers against HF transformers' own router modules.
"""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from serving.kernels.moe_activation import SILU, SWIGLU_OAI, ExpertActivation, gated_activation
from serving.kernels.moe_align import align_by_expert, capacity_for
from serving.kernels.moe_reference import experts_reference
from serving.loader.moe_config import SOFTMAX_TOPK, TOPK_SOFTMAX, MoEConfig
from serving.model import moe_fault
from serving.model.moe import TopKRouter

H, INNER = 8, 6


@st.composite
def routings(draw):
    experts = draw(st.integers(1, 9))
    top_k = draw(st.integers(1, min(experts, 4)))
    tokens = draw(st.integers(0, 12))
    # a few experts only, or all: uneven loads and empty experts
    indices = st.integers(0, experts - 1)
    pool = draw(st.lists(indices, min_size=top_k, max_size=experts, unique=True))
    ids = [draw(st.permutations(pool))[:top_k] for _ in range(tokens)]
    return experts, top_k, tokens, ids


def _weights(experts: int, seed: int, bias: bool):
    g = torch.Generator().manual_seed(seed)
    w13 = torch.randn(experts, 2 * INNER, H, generator=g, dtype=torch.float64)
    w2 = torch.randn(experts, H, INNER, generator=g, dtype=torch.float64)
    b13 = torch.randn(experts, 2 * INNER, generator=g, dtype=torch.float64) if bias else None
    b2 = torch.randn(experts, H, generator=g, dtype=torch.float64) if bias else None
    return w13, w2, b13, b2


def brute_force(x, w13, w2, ids, weights, act, b13, b2):
    out = torch.zeros_like(x)
    for t in range(ids.shape[0]):
        for j in range(ids.shape[1]):
            e = int(ids[t, j])
            h = w13[e] @ x[t] + (0 if b13 is None else b13[e])
            y = w2[e] @ gated_activation(h[None], act)[0] + (0 if b2 is None else b2[e])
            out[t] += weights[t, j] * y
    return out


def tile_emulation(x, w13, w2, ids, weights, act, b13, b2, block_m):
    """The grouped kernel's data flow in torch: per tile, gather the rows of its pairs, multiply
    by the tile's expert, scatter to the pairs' rows (padding rows dropped)."""
    tokens, top_k = ids.shape
    layout = align_by_expert(ids, w13.shape[0], block_m)
    pairs = layout.sorted_pairs.long().view(-1, block_m)
    experts = layout.tile_experts.long()
    live = experts >= 0

    def gemm(a, w, b, row_div, out_rows, scale=None):
        out = torch.zeros(out_rows, w.shape[1], dtype=a.dtype)
        p, e = pairs[live], experts[live]
        ok = p < layout.num_pairs
        rows = a[(p.clamp(max=layout.num_pairs - 1) // row_div)]
        y = torch.einsum("tmk,tnk->tmn", rows, w[e])
        if b is not None:
            y = y + b[e][:, None, :]
        if scale is not None:
            y = y * scale[p.clamp(max=layout.num_pairs - 1)][..., None]
        out[p[ok]] = y[ok]
        return out

    n = tokens * top_k
    if n == 0:
        return torch.zeros_like(x)
    gate_up = gemm(x, w13, b13, top_k, n)
    down = gemm(gated_activation(gate_up, act), w2, b2, 1, n, weights.reshape(-1))
    return down.view(tokens, top_k, -1).sum(dim=1)


ACTS = [ExpertActivation(SILU), ExpertActivation(SWIGLU_OAI, alpha=1.702, limit=1.5)]


@settings(max_examples=40, deadline=None)
@given(routings(), st.sampled_from(ACTS), st.booleans(), st.integers(0, 2**16))
def test_reference_equals_a_loop_over_tokens(routing, act, bias, seed):
    experts, top_k, tokens, ids = routing
    w13, w2, b13, b2 = _weights(experts, seed, bias)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(tokens, H, generator=g, dtype=torch.float64)
    ids_t = torch.tensor(ids, dtype=torch.int64).view(tokens, top_k)
    weights = torch.rand(tokens, top_k, generator=g, dtype=torch.float64)
    expected = brute_force(x, w13, w2, ids_t, weights, act, b13, b2)
    got = experts_reference(x, w13, w2, ids_t, weights, act, b13, b2)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-10)
    for block_m in (1, 4, 16):
        emulated = tile_emulation(x, w13, w2, ids_t, weights, act, b13, b2, block_m)
        torch.testing.assert_close(emulated, expected, rtol=1e-10, atol=1e-10)


@settings(max_examples=50, deadline=None)
@given(routings(), st.sampled_from([1, 2, 16, 64]))
def test_layout_holds_every_pair_once_in_single_expert_tiles(routing, block_m):
    experts, top_k, tokens, ids = routing
    ids_t = torch.tensor(ids, dtype=torch.int64).view(tokens, top_k)
    layout = align_by_expert(ids_t, experts, block_m)
    n = tokens * top_k
    assert layout.capacity == capacity_for(n, experts, block_m)
    assert layout.capacity % block_m == 0
    flat = ids_t.reshape(-1)
    pairs = layout.sorted_pairs.long()
    real = pairs[pairs < n]
    assert sorted(real.tolist()) == list(range(n))  # each pair once, nothing else but padding
    assert layout.counts.tolist() == torch.bincount(flat, minlength=experts).tolist()
    rows = int(layout.num_rows)
    expected_rows = sum(-(-c // block_m) * block_m for c in layout.counts.tolist())
    assert rows == expected_rows and rows <= layout.capacity
    for tile, expert in enumerate(layout.tile_experts.tolist()):
        members = pairs[tile * block_m : (tile + 1) * block_m]
        members = members[members < n]
        if tile * block_m >= rows:
            assert expert == -1 and members.numel() == 0
        else:
            assert 0 <= expert < experts
            assert (flat[members] == expert).all()
            # stable: a token's pairs and the tokens keep their order within an expert
            assert members.tolist() == sorted(members.tolist())


def _router(kind: str, renormalize: bool, experts: int, top_k: int, bias: bool) -> TopKRouter:
    moe = MoEConfig(
        num_experts=experts,
        top_k=top_k,
        intermediate_size=INNER,
        router=kind,
        renormalize=renormalize,
        sparse_layers=(0,),
        router_bias=bias,
    )
    router = TopKRouter(H, moe)
    torch.nn.init.normal_(router.weight)
    if router.bias is not None:
        torch.nn.init.normal_(router.bias)
    return router


def test_qwen3_moe_router_equals_transformers():
    import transformers as tf
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeTopKRouter

    x = torch.randn(11, H)
    for renormalize in (False, True):
        ours = _router(SOFTMAX_TOPK, renormalize, 6, 3, bias=False)
        config = tf.Qwen3MoeConfig(
            hidden_size=H, num_experts=6, num_experts_per_tok=3, norm_topk_prob=renormalize
        )
        theirs = Qwen3MoeTopKRouter(config)
        theirs.weight.data.copy_(ours.weight.data)
        weights, ids = ours(x)
        _, ref_weights, ref_ids = theirs(x)
        assert torch.equal(ids, ref_ids)
        torch.testing.assert_close(weights, ref_weights, rtol=0, atol=0)


def test_gpt_oss_router_equals_transformers():
    import transformers as tf
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssTopKRouter

    x = torch.randn(11, H)
    ours = _router(TOPK_SOFTMAX, False, 8, 4, bias=True)
    config = tf.GptOssConfig(hidden_size=H, num_local_experts=8, num_experts_per_tok=4)
    theirs = GptOssTopKRouter(config)
    theirs.weight.data.copy_(ours.weight.data)
    theirs.bias.data.copy_(ours.bias.data)
    weights, ids = ours(x)
    _, ref_weights, ref_ids = theirs(x)
    assert torch.equal(ids, ref_ids)
    torch.testing.assert_close(weights, ref_weights, rtol=0, atol=0)


def test_gpt_oss_activation_equals_transformers_on_deinterleaved_columns():
    import transformers as tf
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssExperts

    config = tf.GptOssConfig(hidden_size=H, intermediate_size=INNER, num_local_experts=2)
    theirs = GptOssExperts(config)
    interleaved = 4 * torch.randn(5, 2 * INNER)  # past the clamp limit (7) on both sides
    ours = gated_activation(
        torch.cat([interleaved[:, ::2], interleaved[:, 1::2]], dim=-1),
        ExpertActivation(SWIGLU_OAI, config.swiglu_alpha, config.swiglu_limit),
    )
    torch.testing.assert_close(ours, theirs._apply_gate(interleaved), rtol=0, atol=0)


def test_expert_fault_swaps_only_the_chosen_layers_expert():
    ids = torch.tensor([[0, 3], [3, 1], [2, 0]])
    try:
        moe_fault.set_expert_fault(4, 3)
        assert torch.equal(moe_fault.faulted_ids(ids, 1, 8), ids)
        assert moe_fault.faulted_ids(ids, 4, 8).tolist() == [[0, 4], [4, 1], [2, 0]]
        moe_fault.set_expert_fault(4, 7)
        assert moe_fault.faulted_ids(torch.tensor([[7, 1]]), 4, 8).tolist() == [[0, 1]]
    finally:
        moe_fault.set_expert_fault(None)
    assert torch.equal(moe_fault.faulted_ids(ids, 4, 8), ids)
    assert moe_fault._parse("2:5") == (2, 5) and moe_fault._parse("") is None
