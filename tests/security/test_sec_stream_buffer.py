"""A client that stops reading a stream holds one engine output, not one per step: the
engine's queue is drained at engine speed and only the newest (cumulative) output is kept."""

from __future__ import annotations

import asyncio

from sec_fakes import FakeEngine

from serving.sampling_params import SamplingParams
from serving.server.api.generation import generate
from serving.server.base.coalesce import latest_only
from serving.server.base.state import Phase, ServerState
from serving.server.metrics.server_metrics import ServerMetrics
from serving.traffic.logger import TrafficLogger
from serving.traffic.sampler import TrafficSampler
from serving.traffic.segments import SegmentInfo
from vigil.config import load_settings

STEPS = 3_000


def _state(engine: FakeEngine) -> ServerState:
    settings = load_settings(sample_rate=0.0, segment_min_per_hour=0)
    traffic = TrafficLogger(TrafficSampler(0.0, 0), None, model_version="v")
    state = ServerState(settings=settings, metrics=None, traffic=traffic, engine=engine)  # type: ignore[arg-type]
    state.metrics = ServerMetrics("m", state.engine_stats, state.sample_counters)
    state.phase = Phase.READY
    return state


def test_stalled_reader_keeps_the_engine_queue_bounded():
    """Was: every step's output (each pinning its own copy of the text) queued until read."""
    engine = FakeEngine(steps=STEPS, piece="0123456789")

    async def stalled_client():
        stream = generate(
            _state(engine),
            "r1",
            [1, 2],
            SamplingParams(max_tokens=STEPS),
            prompt="p",
            segment=SegmentInfo(),
            tools=[],
        )
        first = await stream.__anext__()
        for _ in range(200):  # the client reads nothing while the engine runs to the end
            await asyncio.sleep(0)
        last = first
        async for out in stream:
            last = out
        return first, last

    first, last = asyncio.run(stalled_client())
    assert engine.max_queued <= 2, engine.max_queued
    assert last.finished and last.outputs[0].text == "0123456789" * STEPS  # nothing lost


def test_latest_only_yields_a_suffix_of_increasing_items_and_the_last():
    async def numbers():
        for i in range(1000):
            yield i
            if i % 7 == 0:
                await asyncio.sleep(0)

    async def slow_reader():
        seen = []
        async for i in latest_only(numbers()):
            seen.append(i)
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        return seen

    seen = asyncio.run(slow_reader())
    assert seen[-1] == 999 and seen == sorted(set(seen)) and len(seen) < 1000


def test_closing_the_reader_stops_the_engine_stream():
    engine = FakeEngine(steps=10**6, piece="x")

    async def leave_early():
        stream = generate(
            _state(engine),
            "r2",
            [1],
            SamplingParams(max_tokens=10),
            prompt=None,
            segment=SegmentInfo(),
            tools=[],
        )
        await stream.__anext__()
        await stream.aclose()
        await asyncio.sleep(0.01)

    asyncio.run(leave_early())
    assert "r2" in engine.aborted


def test_errors_reach_the_reader():
    async def failing():
        yield 1
        raise ValueError("bad request")

    async def read():
        return [i async for i in latest_only(failing())]

    try:
        asyncio.run(read())
    except ValueError as exc:
        assert "bad request" in str(exc)
    else:
        raise AssertionError("the error was swallowed")
