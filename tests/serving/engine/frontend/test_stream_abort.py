"""A reader that stops (its stream closed, or its task cancelled) aborts the engine request at
once, in both engine modes: the abort is sent before `aclose()` returns, never left to the
garbage collector finalising an abandoned generator, and the engine frees the request's blocks
long before it could have finished."""

from __future__ import annotations

import asyncio
import time

import pytest
from core_fixtures import tiny_config, tiny_model_dir
from engine_fixtures import greedy

from serving.engine import AsyncLLMEngine, LLMEngine
from serving.engine.frontend.core_client import EngineCoreClient

PROMPT = [5, 17, 99, 3, 42, 7]


@pytest.fixture(scope="module", params=["inprocess", "separate"])
def engine(request, tmp_path_factory):
    config = tiny_config(tiny_model_dir(tmp_path_factory.mktemp("abort")))
    eng = (
        AsyncLLMEngine(LLMEngine(config))
        if request.param == "inprocess"
        else EngineCoreClient(config)
    )
    eng.start()
    yield eng
    asyncio.run(eng.shutdown())


class AbortRecorder:
    """Wraps the engine's abort: which request ids it was asked to abort, and when."""

    def __init__(self, engine) -> None:
        self.engine, self.real = engine, engine.abort
        self.calls: list[tuple[str, float]] = []
        engine.abort = self

    def __call__(self, request_id: str) -> None:
        self.calls.append((request_id, time.monotonic()))
        self.real(request_id)

    def restore(self) -> None:
        del self.engine.abort  # the instance attribute: back to the class's method


def _idle(engine) -> bool:
    stats = engine.stats()
    return stats.num_running == 0 and stats.num_waiting == 0 and stats.kv_cache_usage == 0.0


async def _wait_idle(engine, timeout: float) -> float:
    start = time.monotonic()
    while not _idle(engine):
        assert time.monotonic() - start < timeout, f"still running {timeout}s after the abort"
        await asyncio.sleep(0.005)
    return time.monotonic() - start


def test_closing_the_stream_aborts_before_aclose_returns(engine):
    recorder = AbortRecorder(engine)

    async def main() -> None:
        stream = engine.generate("closed", PROMPT, greedy(1000))
        for _ in range(3):
            out = await anext(stream)
        assert not out.finished and engine.stats().num_running == 1
        await stream.aclose()  # what the server does when the client disconnects
        assert [rid for rid, _ in recorder.calls] == ["closed"]  # already sent, not at GC time
        await _wait_idle(engine, timeout=2.0)

    try:
        asyncio.run(main())
    finally:
        recorder.restore()


def test_cancelling_the_reader_aborts_at_once(engine):
    recorder = AbortRecorder(engine)

    async def main() -> None:
        got = asyncio.Event()

        async def reader() -> None:
            async for _ in engine.generate("cancelled", PROMPT, greedy(1000)):
                got.set()

        task = asyncio.create_task(reader())
        await got.wait()
        task.cancel()
        cancelled_at = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await task
        ((rid, at),) = recorder.calls
        assert rid == "cancelled" and at - cancelled_at < 0.1
        await _wait_idle(engine, timeout=2.0)

    try:
        asyncio.run(main())
    finally:
        recorder.restore()
