"""AsyncLLMEngine: the loop runs in its own thread; streams match the synchronous engine;
a caller that goes away aborts its request and frees its blocks; abort, drain and shutdown."""

from __future__ import annotations

import asyncio
import threading

import pytest
import torch
from engine_fixtures import greedy, make_engine, run_to_completion, save_tiny_model

from serving.engine import AsyncLLMEngine
from serving.engine.frontend.async_engine import EngineNotRunningError
from serving.loader import load_model_files

PROMPTS = {f"r{i}": [(7 * i + j) % 256 for j in range(3 + 6 * i)] for i in range(4)}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp("tiny_async")
    save_tiny_model("qwen2", path, seed=1)
    return load_model_files(path)


@pytest.fixture(scope="module")
def expected(loaded):
    engine = make_engine(loaded)
    finals = run_to_completion(engine, {0: [(rid, p, greedy(12)) for rid, p in PROMPTS.items()]})
    return {rid: out.outputs[0].token_ids for rid, out in finals.items()}


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def collect(aengine, rid, prompt, params):
    return [out async for out in aengine.generate(rid, prompt, params)]


def test_concurrent_streams_match_the_sync_engine_and_run_off_the_event_loop(loaded, expected):
    engine = make_engine(loaded)
    step_threads = set()
    real_step = engine.step

    def step():
        step_threads.add(threading.current_thread().name)
        return real_step()

    engine.step = step

    async def main():
        aengine = AsyncLLMEngine(engine)
        aengine.start()
        results = await asyncio.gather(
            *(collect(aengine, rid, p, greedy(12)) for rid, p in PROMPTS.items())
        )
        await aengine.shutdown()
        return results

    results = run(main())
    assert step_threads == {"vigil-engine-loop"}
    for rid, outs in zip(PROMPTS, results, strict=True):
        # one output per generated token, unless the reader fell behind and the slot folded
        # some together (by design): every output still brings new tokens
        counts = [len(o.outputs[0].token_ids) for o in outs]
        assert counts == sorted(set(counts)) and counts[-1] == 12, counts
        assert [o.finished for o in outs] == [False] * (len(outs) - 1) + [True]
        final = outs[-1].outputs[0]
        assert final.token_ids == expected[rid]
        assert "".join(o.outputs[0].delta for o in outs) == final.text


def test_caller_going_away_aborts_and_frees_blocks(loaded):
    engine = make_engine(loaded)

    async def main():
        aengine = AsyncLLMEngine(engine)
        aengine.start()
        seen = 0
        async for _ in aengine.generate("gone", PROMPTS["r3"], greedy(200)):
            seen += 1
            if seen == 3:
                break  # the client disconnected
        await aengine.wait_idle()
        stats = aengine.stats()
        await aengine.shutdown()
        return stats

    stats = run(main())
    assert (stats.num_running, stats.num_waiting, stats.kv_cache_usage) == (0, 0, 0.0)
    assert not engine.has_unfinished_requests()
    assert engine.block_manager.num_free_blocks == engine.block_manager.num_blocks


def test_task_cancellation_aborts(loaded):
    engine = make_engine(loaded)

    async def main():
        aengine = AsyncLLMEngine(engine)
        aengine.start()
        task = asyncio.create_task(collect(aengine, "c", PROMPTS["r2"], greedy(500)))
        while aengine.num_running() == 0:
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await aengine.wait_idle()
        await aengine.shutdown()

    run(main())
    assert not engine.has_unfinished_requests()
    assert engine.block_manager.num_free_blocks == engine.block_manager.num_blocks


def test_explicit_abort_ends_the_stream(loaded):
    async def main():
        aengine = AsyncLLMEngine(make_engine(loaded))
        aengine.start()
        outs = []
        async for out in aengine.generate("a", PROMPTS["r1"], greedy(500)):
            outs.append(out)
            if len(outs) == 2:
                aengine.abort("a")
        await aengine.shutdown()
        return outs

    outs = run(main())
    assert outs[-1].finished and outs[-1].outputs[0].finish_reason == "abort"


def test_bad_request_raises_in_the_caller(loaded):
    async def main():
        aengine = AsyncLLMEngine(make_engine(loaded))
        with pytest.raises(EngineNotRunningError):
            await collect(aengine, "x", [1, 2], greedy())
        aengine.start()
        with pytest.raises(ValueError, match="context length"):
            await collect(aengine, "x", [1] * 5000, greedy())
        assert aengine.num_waiting() == 0
        await aengine.shutdown()

    run(main())


def test_drain_finishes_running_requests_and_refuses_new_ones(loaded, expected):
    async def main():
        aengine = AsyncLLMEngine(make_engine(loaded))
        aengine.start()
        task = asyncio.create_task(collect(aengine, "r0", PROMPTS["r0"], greedy(12)))
        while aengine.num_running() == 0:
            await asyncio.sleep(0.005)
        drained = await aengine.drain(timeout=30)
        with pytest.raises(EngineNotRunningError):
            await collect(aengine, "late", [1, 2], greedy())
        outs = await task
        await aengine.shutdown()
        return drained, outs

    drained, outs = run(main())
    assert drained and outs[-1].outputs[0].token_ids == expected["r0"]


def test_drain_timeout_aborts_the_rest(loaded):
    async def main():
        aengine = AsyncLLMEngine(make_engine(loaded))
        aengine.start()
        task = asyncio.create_task(collect(aengine, "long", PROMPTS["r0"], greedy(100_000)))
        while aengine.num_running() == 0:
            await asyncio.sleep(0.005)
        drained = await aengine.drain(timeout=0.2)
        outs = await task
        await aengine.shutdown()
        return drained, outs

    drained, outs = run(main())
    assert not drained and outs[-1].outputs[0].finish_reason == "abort"


def test_a_failing_step_fails_its_requests_and_the_engine_keeps_serving(loaded, expected):
    engine = make_engine(loaded)
    real_step = engine.step
    calls = {"n": 0}

    def flaky_step():
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("boom")
        return real_step()

    engine.step = flaky_step

    async def main():
        aengine = AsyncLLMEngine(engine)
        aengine.start()
        with pytest.raises(RuntimeError, match="boom"):
            await collect(aengine, "victim", PROMPTS["r1"], greedy(12))
        outs = await collect(aengine, "r0", PROMPTS["r0"], greedy(12))
        await aengine.shutdown()
        return outs

    outs = run(main())
    assert outs[-1].outputs[0].token_ids == expected["r0"]
    assert engine.block_manager.num_free_blocks == engine.block_manager.num_blocks


def test_shutdown_fails_callers_still_waiting(loaded):
    async def main():
        aengine = AsyncLLMEngine(make_engine(loaded))
        aengine.start()
        task = asyncio.create_task(collect(aengine, "w", PROMPTS["r2"], greedy(100_000)))
        while aengine.num_running() == 0:
            await asyncio.sleep(0.005)
        await aengine.shutdown()
        return await task

    outs = run(main())
    assert outs[-1].outputs[0].finish_reason == "abort"  # shutdown aborts what is in flight


def test_requests_taken_into_the_engine_count_as_waiting_during_the_next_step(loaded):
    """The loop thread moves queued adds into the engine and then runs a step; until that step's
    stats snapshot, the requests must still count as waiting (admission control reads it): they
    were invisible for a whole step, so a burst could overrun the waiting-queue limit."""
    engine = make_engine(loaded, max_num_seqs=1)
    in_step, release = threading.Event(), threading.Event()
    real_step = engine.step

    def slow_step():
        in_step.set()
        release.wait(30)
        return real_step()

    engine.step = slow_step
    aengine = AsyncLLMEngine(engine)
    aengine.start()

    async def burst():
        gens = [collect(aengine, f"r{i}", [5, 6, 7, 8], greedy(2)) for i in range(3)]
        tasks = [asyncio.create_task(g) for g in gens]
        while not in_step.is_set() or aengine._inbox:  # all three taken in, the step under way
            await asyncio.sleep(0.005)
        waiting = aengine.num_waiting()
        release.set()
        await asyncio.gather(*tasks)
        return waiting

    try:
        assert run(burst()) == 3
        assert aengine.num_waiting() == 0
    finally:
        release.set()
        run(aengine.shutdown())
