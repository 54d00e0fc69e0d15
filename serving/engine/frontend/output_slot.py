"""`OutputSlot`: one request's hand-over point from the engine to its asyncio reader, holding at
most one output.

The engine side puts an output per step (from any thread, through `call_soon_threadsafe`). A
reader that falls behind does not build a queue: outputs are cumulative (whole text, token ids
and logprobs so far), so the newest replaces the waiting one, and the waiting one's per-step
`delta` is prepended to the newest's, so the reader still gets every piece of text exactly once.
Memory per request stays one output however slow the client, and a producer that sees the
reader `behind` need not build outputs that would only be merged away.

`read_slot` is the reader's loop, shared by both engine fronts.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncGenerator, Callable

from serving.outputs import RequestOutput


def merge_outputs(older: RequestOutput, newer: RequestOutput) -> RequestOutput:
    """`newer` with each choice's delta extended by what `older` had not yet handed over."""
    pending = {c.index: c.delta for c in older.outputs if c.delta}
    if not pending:
        return newer
    choices = [
        dataclasses.replace(c, delta=pending.get(c.index, "") + c.delta) for c in newer.outputs
    ]
    return dataclasses.replace(newer, outputs=choices)


class OutputSlot:
    """Single-reader, event-loop-side; `put` is called on the reader's loop."""

    __slots__ = ("_item", "_ready", "merged", "behind")

    def __init__(self) -> None:
        self._item: RequestOutput | BaseException | None = None
        self._ready = asyncio.Event()
        self.merged = 0  # outputs folded into a newer one (the reader was behind)
        # set by the producer when it hands an output over, cleared when the reader takes one: a
        # producer that finds it set may skip building this step's output, since the next one
        # carries this step's text too (outputs are cumulative, deltas since the last one built)
        self.behind = False

    def put(self, item: RequestOutput | BaseException) -> None:
        held = self._item
        if isinstance(held, RequestOutput) and isinstance(item, RequestOutput):
            item = merge_outputs(held, item)
            self.merged += 1
        elif isinstance(held, BaseException):
            return  # an error ends the stream: nothing after it matters
        self._item = item
        self._ready.set()

    def take(self) -> RequestOutput | BaseException | None:
        """What waits, if anything, now; the slot is empty after it and its reader caught up."""
        item, self._item = self._item, None
        if item is not None:
            self.behind = False
        return item

    async def get(self) -> RequestOutput | BaseException:
        while self._item is None:
            self._ready.clear()
            await self._ready.wait()
        item = self.take()
        assert item is not None  # one reader: nobody took it since it was put
        return item


async def read_slot(
    slot: OutputSlot, abort: Callable[[], None]
) -> AsyncGenerator[RequestOutput, None]:
    """The request's outputs up to the finished one; an error put in the slot is raised. A reader
    that stops early (closed, cancelled) calls `abort()` here. A caller that wraps this generator
    must close it itself (`contextlib.aclosing`): an abandoned one is finalised late, and the
    request would run on meanwhile."""
    finished = False
    try:
        while True:
            item = await slot.get()
            if isinstance(item, BaseException):
                finished = True
                raise item
            finished = item.finished
            yield item
            if finished:
                return
    finally:
        if not finished:  # the caller went away: free the request's blocks now
            abort()
