"""`OutputSlot`: one request's hand-over point from the engine to its asyncio reader, holding at
most one output.

The engine side puts an output per step (from any thread, through `call_soon_threadsafe`). A
reader that falls behind does not build a queue: outputs are cumulative (whole text, token ids
and logprobs so far), so the newest replaces the waiting one, and the waiting one's per-step
`delta` is prepended to the newest's, so the reader still gets every piece of text exactly once.
Memory per request stays one output however slow the client.
"""

from __future__ import annotations

import asyncio
import dataclasses

from serving.outputs import RequestOutput


def merge_outputs(older: RequestOutput, newer: RequestOutput) -> RequestOutput:
    """`newer` with each choice's delta extended by what `older` had not yet handed over."""
    pending = {c.index: c.delta for c in older.outputs if c.delta}
    if not pending:
        return newer
    choices = [dataclasses.replace(c, delta=pending.get(c.index, "") + c.delta) for c in newer.outputs]
    return dataclasses.replace(newer, outputs=choices)


class OutputSlot:
    """Single-reader, event-loop-side; `put` is called on the reader's loop."""

    __slots__ = ("_item", "_ready", "merged")

    def __init__(self) -> None:
        self._item: RequestOutput | BaseException | None = None
        self._ready = asyncio.Event()
        self.merged = 0  # outputs folded into a newer one (the reader was behind)

    def put(self, item: RequestOutput | BaseException) -> None:
        held = self._item
        if isinstance(held, RequestOutput) and isinstance(item, RequestOutput):
            item = merge_outputs(held, item)
            self.merged += 1
        elif isinstance(held, BaseException):
            return  # an error ends the stream: nothing after it matters
        self._item = item
        self._ready.set()

    async def get(self) -> RequestOutput | BaseException:
        while self._item is None:
            self._ready.clear()
            await self._ready.wait()
        item, self._item = self._item, None
        return item
