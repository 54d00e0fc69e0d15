"""Continuous batching must not change results: the same greedy requests run alone, together,
arriving mid-stream, with chunked prefill on/off or a tiny budget, with prefix-cache hits, under
a KV pool so small that preemption must happen, and with max_num_seqs=2 give identical tokens,
and every request finishes with no KV block leaked."""

from __future__ import annotations

import pytest
import torch
from engine_fixtures import greedy, make_engine, run_to_completion, save_tiny_model

from serving.loader import load_model_files

MAX_TOKENS = {"p0": 20, "p1": 12, "p2": 24, "p3": 16, "p4": 20, "p5": 8}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp("tiny_llama")
    save_tiny_model("llama", path, seed=3)
    return load_model_files(path)


@pytest.fixture(scope="module")
def prompts() -> dict[str, list[int]]:
    g = torch.Generator().manual_seed(7)

    def rand(n):
        return torch.randint(0, 256, (n,), generator=g).tolist()

    base = rand(24)  # a shared prefix: prefix-cache hits between requests
    return {
        "p0": base + rand(5),
        "p1": base + rand(13),
        "p2": rand(3),
        "p3": rand(40),
        "p4": base[:10] + rand(7),
        "p5": rand(17),
    }


@pytest.fixture(scope="module")
def alone(loaded, prompts) -> dict[str, list[int]]:
    """Each request by itself in a fresh engine: no batching, no chunking, no prefix cache."""
    out = {}
    for rid, p in prompts.items():
        engine = make_engine(loaded, enable_prefix_caching=False, max_num_batched_tokens=256)
        out[rid] = (
            run_to_completion(engine, {0: [(rid, p, greedy(MAX_TOKENS[rid]))]})[rid]
            .outputs[0]
            .token_ids
        )
    return out


def _requests(prompts, ids):
    return [(rid, prompts[rid], greedy(MAX_TOKENS[rid])) for rid in ids]


SCENARIOS = {
    "together": ({}, {0: ["p0", "p1", "p2", "p3", "p4", "p5"]}),
    "mid_stream": ({}, {0: ["p3"], 2: ["p0", "p2"], 5: ["p1"], 9: ["p4"], 14: ["p5"]}),
    "chunked_off": (
        dict(enable_chunked_prefill=False, max_num_batched_tokens=128, max_model_len=128),
        {0: ["p0", "p1", "p2", "p3", "p4", "p5"]},
    ),
    "tiny_budget": (dict(max_num_batched_tokens=5), {0: ["p0", "p1", "p2"], 3: ["p3", "p4", "p5"]}),
    "max_num_seqs_2": (dict(max_num_seqs=2), {0: ["p0", "p1", "p2", "p3", "p4", "p5"]}),
    "preemption": (dict(num_kv_blocks=18), {0: ["p0", "p1", "p2", "p3", "p4", "p5"]}),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_batching_does_not_change_greedy_tokens(name, loaded, prompts, alone):
    overrides, plan = SCENARIOS[name]
    engine = make_engine(loaded, **overrides)
    finals = run_to_completion(
        engine, {step: _requests(prompts, ids) for step, ids in plan.items()}
    )
    assert set(finals) == set(prompts)  # every request finishes
    for rid, out in finals.items():
        assert out.outputs[0].token_ids == alone[rid], f"{name}: {rid} differs"
        assert out.outputs[0].finish_reason == "length"
    stats = engine.stats()
    if name == "preemption":
        assert stats.num_preemptions_total > 0
        assert any(out.metrics.num_preemptions for out in finals.values())
    if name == "tiny_budget":  # chunked prefill really happened: a 40-token prompt in 5-token steps
        assert finals["p3"].metrics.first_token_time > finals["p3"].metrics.first_scheduled_time
    bm = engine.block_manager
    assert bm.num_free_blocks == bm.num_blocks and all(b.ref_count == 0 for b in bm.blocks)


def test_prefix_cache_hits_give_the_same_tokens(loaded, prompts, alone):
    engine = make_engine(loaded)
    first = run_to_completion(engine, {0: _requests(prompts, ["p0", "p3"])})
    assert engine.stats().prefix_cache_hits_total == 0
    again = run_to_completion(engine, {0: _requests(prompts, list(prompts))})
    # full blocks of 4, at least one token left to compute: p0 29 -> 28, p3 40 -> 36; p1 and p4
    # share the first 24 and 10 tokens of p0's prefix -> 24 and 8
    cached = {rid: out.metrics.num_cached_prompt_tokens for rid, out in again.items()}
    assert cached == {"p0": 28, "p1": 24, "p2": 0, "p3": 36, "p4": 8, "p5": 0}
    assert engine.stats().prefix_cache_hits_total == sum(cached.values())
    for rid, out in {**first, **again}.items():
        assert out.outputs[0].token_ids == alone[rid], rid


def test_seeded_n_samples_survive_preemption_and_batching(loaded, prompts):
    """n=3 seeded samples share prompt blocks (CoW); squeezed into a pool that forces preemption
    and mixed with other traffic, each sample still draws exactly the same tokens."""
    from serving.sampling_params import SamplingParams

    params = SamplingParams(n=3, max_tokens=20, temperature=1.0, seed=77)
    roomy = make_engine(loaded)
    alone = run_to_completion(roomy, {0: [("n", prompts["p1"], params)]})["n"]
    tight = make_engine(loaded, num_kv_blocks=24)
    plan = {
        0: _requests(prompts, ["p3", "p5"]),
        1: [("n", prompts["p1"], params)],
        4: _requests(prompts, ["p0"]),
    }
    mixed = run_to_completion(tight, plan)
    assert mixed["n"].metrics.num_preemptions > 0  # some of its samples were recomputed
    assert [c.token_ids for c in mixed["n"].outputs] == [c.token_ids for c in alone.outputs]
    assert len({tuple(c.token_ids) for c in alone.outputs}) == 3
    bm = tight.block_manager
    assert bm.num_free_blocks == bm.num_blocks
