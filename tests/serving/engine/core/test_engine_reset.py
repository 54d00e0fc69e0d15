"""`LLMEngine.reset()`: what the start-up warm-up asks for. After it no counter, KV block or
prefix-cache entry remembers what ran, and the next requests come out as on a new engine."""

from __future__ import annotations

import pytest
import torch
from engine_fixtures import greedy, make_engine, run_to_completion, save_tiny_model

from serving.loader import load_model_files

PROMPTS = {f"r{i}": [(11 * i + j) % 256 for j in range(9 + 4 * i)] for i in range(3)}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp("tiny_reset")
    save_tiny_model("llama", path, seed=3)
    return load_model_files(path)


def _run(engine):
    finals = run_to_completion(engine, {0: [(rid, p, greedy(6)) for rid, p in PROMPTS.items()]})
    return {rid: out.outputs[0].token_ids for rid, out in finals.items()}


@pytest.mark.parametrize("async_scheduling", ["off", "on"])
def test_reset_forgets_every_count_block_and_cached_prefix(tiny, async_scheduling):
    engine = make_engine(tiny, num_kv_blocks=64, async_scheduling=async_scheduling)
    first = _run(engine)
    before = engine.stats()
    assert before.prompt_tokens_total and before.generation_tokens_total
    engine.reset()
    stats = engine.stats()
    assert (
        stats.prompt_tokens_total,
        stats.generation_tokens_total,
        stats.prefix_cache_queries_total,
        stats.prefix_cache_hits_total,
        stats.num_preemptions_total,
    ) == (0, 0, 0, 0, 0)
    assert engine.block_manager.num_free_blocks == 64 and stats.kv_cache_usage == 0.0
    assert _run(engine) == first
    again = engine.stats()
    # a prefix cache that survived would answer the same prompts from its blocks
    assert (
        again.prefix_cache_hits_total == 0
        and again.prompt_tokens_total == before.prompt_tokens_total
    )


def test_reset_refuses_an_engine_with_live_requests(tiny):
    engine = make_engine(tiny, num_kv_blocks=64)
    engine.add_request("live", [1, 2, 3], greedy(4))
    with pytest.raises(RuntimeError, match="1 requests live"):
        engine.reset()
    assert engine.has_unfinished_requests()
