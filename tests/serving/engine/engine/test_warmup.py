"""The start-up warm-up burst (serving/engine/engine/warmup.py) leaves no trace: counters at
zero, every KV block free, nothing in the prefix cache, and the next requests come out exactly as
on an engine that never warmed up. `build_engine` runs it only on CUDA; the test calls it itself."""

from __future__ import annotations

import pytest
from engine_fixtures import greedy, make_engine, run_to_completion, save_tiny_model

from serving.engine.engine.warmup import REQUEST_PREFIX, warm_up
from serving.loader import load_model_files


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny_warmup")
    save_tiny_model("llama", path, seed=7)
    return load_model_files(str(path))


@pytest.mark.parametrize("async_scheduling", ["off", "on"])
def test_warm_up_leaves_no_trace_and_changes_no_output(tiny, async_scheduling):
    warmed = make_engine(tiny, num_kv_blocks=128, async_scheduling=async_scheduling)
    steps = warm_up(warmed)
    assert steps >= 2
    stats = warmed.stats()
    assert stats.prompt_tokens_total == 0 and stats.generation_tokens_total == 0
    assert stats.num_preemptions_total == 0
    assert warmed.block_manager.num_free_blocks == warmed.block_manager.num_blocks
    assert warmed.block_manager.cached == {} and warmed.block_manager.prefix_queries == 0
    assert not warmed.requests and not any(r.startswith(REQUEST_PREFIX) for r in warmed.requests)

    cold = make_engine(tiny, num_kv_blocks=128, async_scheduling=async_scheduling)
    arrivals = {
        0: [("a", [5, 6, 7, 8, 9], greedy(12)), ("b", list(range(40, 61)), greedy(7))],
        2: [("c", [5, 6, 7, 8, 9, 10], greedy(9))],
    }
    got, want = run_to_completion(warmed, arrivals), run_to_completion(cold, arrivals)
    assert {k: v.outputs[0].token_ids for k, v in got.items()} == {
        k: v.outputs[0].token_ids for k, v in want.items()
    }
    assert warmed.stats().prompt_tokens_total == cold.stats().prompt_tokens_total


def test_warm_up_refuses_a_busy_engine(tiny):
    engine = make_engine(tiny, num_kv_blocks=64)
    engine.add_request("x", [1, 2, 3], greedy(4))
    with pytest.raises(RuntimeError, match="before the engine takes requests"):
        warm_up(engine)
