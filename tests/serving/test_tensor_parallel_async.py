"""Async scheduling under tensor parallelism (CPU, gloo, 2 processes): the driver samples on its
device and broadcasts the ids; the worker takes the next step's pending input rows from them.

TP=2 with async scheduling gives the very tokens (and logprobs within 1e-4) of TP=1 with async
scheduling, and, for every request not aborted, those of TP=2 and TP=1 synchronous: requests of
different lengths join and finish at different steps (so pending rows are not in steady order),
n > 1 forks, a stop token mid-flight, an abort mid-flight and prompt logprobs."""

from __future__ import annotations

import os

import pytest
import torch
from engine_fixtures import greedy, make_engine, record_launches_and_reads, save_tiny_model

from serving.distributed import tp_runner
from serving.loader import load_model_files
from serving.sampling_params import SamplingParams

ABORT_STEP, ABORTED = 7, "a"


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp("tiny_qwen3_tp_async")
    save_tiny_model("qwen3", path, seed=5)
    return load_model_files(path)


def _prompts() -> list[list[int]]:
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, 256, (n,), generator=g).tolist() for n in (9, 3, 17, 30, 5, 12)]


def _engine(loaded, tp: int, mode: str):
    return make_engine(
        loaded,
        max_num_batched_tokens=20,
        tensor_parallel_size=tp,
        torch_threads=1,
        async_scheduling=mode,
    )


def _plan(stop_token: int) -> dict[int, list]:
    p = _prompts()
    scored = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True, prompt_logprobs=2)
    stopper = SamplingParams(
        max_tokens=16, temperature=0.0, ignore_eos=True, stop_token_ids=[stop_token]
    )
    return {
        0: [
            (ABORTED, p[0], greedy(20, logprobs=2)),
            ("b", p[1], greedy(5)),
            ("scored", p[2], scored),
        ],
        2: [("fork", p[3], greedy(8, n=2, logprobs=1))],
        4: [("stopper", p[4], stopper)],
        6: [("late", p[5], greedy(6, n=3))],
    }


def _drive(engine, plan: dict[int, list], abort_step: int | None) -> dict:
    finals, step, pending = {}, 0, dict(plan)
    try:
        while pending or engine.has_unfinished_requests():
            for rid, ids, params in pending.pop(step, []):
                engine.add_request(rid, ids, params)
            if step == abort_step:
                finals[ABORTED] = engine.abort(ABORTED)
            for out in engine.step():
                if out.finished:
                    finals[out.request_id] = out
            step += 1
            assert step < 500
        bm = engine.block_manager
        assert bm.num_free_blocks == bm.num_blocks and not engine._pending
    finally:
        engine.close()
    return finals


def _summary(finals: dict, skip: tuple[str, ...] = ()) -> dict:
    return {
        rid: [(list(c.token_ids), c.finish_reason) for c in out.outputs]
        for rid, out in finals.items()
        if rid not in skip
    }


def _assert_logprobs_close(ref: dict, got: dict, skip: tuple[str, ...] = ()) -> None:
    for rid, a in ref.items():
        if rid in skip:
            continue
        b = got[rid]
        for ca, cb in zip(a.outputs, b.outputs, strict=True):
            if ca.logprobs is not None:
                torch.testing.assert_close(
                    torch.tensor([t.logprob for t in cb.logprobs]),
                    torch.tensor([t.logprob for t in ca.logprobs]),
                    atol=1e-4,
                    rtol=0,
                )
                assert [[i for i, _, _ in t.top] for t in cb.logprobs] == [
                    [i for i, _, _ in t.top] for t in ca.logprobs
                ]
        if a.prompt_logprobs is not None:
            torch.testing.assert_close(
                torch.tensor([t.logprob for t in b.prompt_logprobs[1:]]),
                torch.tensor([t.logprob for t in a.prompt_logprobs[1:]]),
                atol=1e-4,
                rtol=0,
            )


def test_tp2_async_matches_tp1_and_synchronous(loaded, monkeypatch):
    # the stop token: the 4th greedy token of "stopper" alone, so the stop lands mid-flight
    alone = _drive(_engine(loaded, 1, "off"), {0: [("s", _prompts()[4], greedy(8))]}, None)
    stop_token = alone["s"].outputs[0].token_ids[3]
    plan = _plan(stop_token)

    gathers: list[tuple[list[int], list[int]]] = []
    real_take = tp_runner.take_pending

    def take(input_ids, rows, src, *args):
        gathers.append((list(rows), list(src)))
        return real_take(input_ids, rows, src, *args)

    monkeypatch.setattr(tp_runner, "take_pending", take)
    events = record_launches_and_reads(monkeypatch, tp_runner.TensorParallelRunner)

    engine = _engine(loaded, 2, "on")
    assert engine.async_scheduling
    tp2_async = _drive(engine, plan, ABORT_STEP)
    assert "launch,launch" in ",".join(events)  # a step launched before its predecessor was read
    # pending rows out of steady order (joins, forks and finishes reshuffle the batch)
    assert any(rows != src or rows != list(range(len(rows))) for rows, src in gathers)
    assert gathers and all(len(rows) == len(src) for rows, src in gathers)

    tp1_async = _drive(_engine(loaded, 1, "on"), plan, ABORT_STEP)
    tp2_sync = _drive(_engine(loaded, 2, "off"), plan, None)
    tp1_sync = _drive(_engine(loaded, 1, "off"), plan, None)

    finished = tp2_async["stopper"].outputs[0]
    assert finished.finish_reason == "stop" and len(finished.token_ids) <= 4
    assert tp2_async[ABORTED].outputs[0].finish_reason == "abort"
    assert len(tp2_async["fork"].outputs) == 2 and len(tp2_async["late"].outputs) == 3
    assert _summary(tp2_async) == _summary(tp1_async)
    _assert_logprobs_close(tp1_async, tp2_async)
    assert (
        _summary(tp2_async, (ABORTED,))
        == _summary(tp2_sync, (ABORTED,))
        == _summary(tp1_sync, (ABORTED,))
    )
    _assert_logprobs_close(tp1_sync, tp2_async, (ABORTED,))
    _assert_logprobs_close(tp1_sync, tp2_sync)


def test_switching_modes_between_steps(loaded):
    """set_async_scheduling flips a running TP engine both ways; the tokens stay those of TP=1."""
    prompts = _prompts()
    ref = _drive(
        _engine(loaded, 1, "off"),
        {0: [("x", prompts[3], greedy(12)), ("y", prompts[1], greedy(9))]},
        None,
    )
    engine = _engine(loaded, 2, "off")
    try:
        engine.add_request("x", prompts[3], greedy(12))
        engine.add_request("y", prompts[1], greedy(9))
        finals, step = {}, 0
        while engine.has_unfinished_requests():
            if step % 3 == 0:
                for out in engine.set_async_scheduling(not engine.async_scheduling):
                    if out.finished:
                        finals[out.request_id] = out
            for out in engine.step():
                if out.finished:
                    finals[out.request_id] = out
            step += 1
        for out in engine.set_async_scheduling(False):
            finals[out.request_id] = out
    finally:
        engine.close()
    assert _summary(finals) == _summary(ref)


def test_close_with_a_step_in_flight_is_prompt(loaded):
    import time

    engine = _engine(loaded, 2, "on")
    engine.add_request("x", _prompts()[0], greedy(50))
    for _ in range(3):
        engine.step()
    assert engine._inflight is not None  # launched, not read back
    workers = engine.tensor_parallel.workers.procs
    ring = getattr(engine.runner.channel.host, "_shm", None)  # the shared-memory ring, on x86
    segment = f"/dev/shm/{ring.name.lstrip('/')}" if ring is not None else None
    assert segment is None or os.path.exists(segment)
    t0 = time.monotonic()
    engine.close()
    assert time.monotonic() - t0 < 10.0
    assert all(p.poll() is not None for p in workers)
    assert segment is None or not os.path.exists(segment)  # unlinked: nothing left in /dev/shm


# starts real OS processes: left out by make test-fast
pytestmark = pytest.mark.processes
