"""CPU work of a request (templating, tokenizing, decoding a prompt): on the event loop when it
is small, in a thread of the pool when it is not.

The hop to a thread costs more than encoding a short prompt, and under a burst of new requests
the hops queue behind each other (a burst of 64 short prompts spent ~14 % of the API loop's time
creating and switching threads). A long conversation still leaves the loop free for other
streams while it is templated and tokenized.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# characters (or token ids) of prompt text below which the work stays on the loop (~0.1 ms)
INLINE_LIMIT = 4096


async def run_sized(fn: Callable[[], T], size: int) -> T:
    if size <= INLINE_LIMIT:
        return fn()
    return await asyncio.to_thread(fn)
