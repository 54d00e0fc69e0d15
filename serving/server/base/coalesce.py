"""Bounded buffering between the engine and a slow client.

The engine pushes one `RequestOutput` per step into the request's queue. A client that stops
reading would let that queue grow without bound, each entry pinning its own copy of the text
so far (quadratic memory). `latest_only` drains the engine's stream at engine speed and keeps
just the newest output: outputs are cumulative (whole text, token ids and logprobs so far), so
the newest one carries everything older ones did, and the reader's deltas, computed from the
cumulative text, are the same. Only `CompletionOutput.delta` (per engine step) loses meaning.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TypeVar

T = TypeVar("T")


async def latest_only(stream: AsyncIterator[T]) -> AsyncIterator[T]:
    """Yield items of `stream`, skipping any that a newer item supersedes while the consumer
    is busy; at most one item waits here at any time. Closing this closes `stream`."""
    latest: list[T] = []  # 0 or 1 item
    finished = False
    error: BaseException | None = None
    ready = asyncio.Event()

    async def pump() -> None:
        nonlocal finished, error
        try:
            async for item in stream:
                latest[:] = [item]
                ready.set()
        except Exception as exc:  # re-raised in the consumer
            error = exc
        finally:
            finished = True
            ready.set()

    task = asyncio.create_task(pump())
    try:
        while True:
            await ready.wait()
            ready.clear()
            if latest:
                item = latest.pop()
                yield item
            if finished and not latest:
                if error is not None:
                    raise error
                return
    finally:
        if not task.done():
            task.cancel()  # cancels the engine stream's wait: its cleanup aborts the request
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()
