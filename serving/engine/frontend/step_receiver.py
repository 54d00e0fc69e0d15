"""The API side of the core's output socket: the receiving loop of the output thread, and the
hand-over of outputs (or a failure) to each reader's event loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable

import zmq

from serving.engine.frontend.async_engine import put_all
from serving.engine.frontend.core_handle import CoreHandle
from serving.engine.frontend.messages import StepOutputs
from serving.engine.frontend.step_fold import LiveRequest

log = logging.getLogger(__name__)


def receive_steps(
    core: CoreHandle, alive: Callable[[], bool], on_step: Callable[[StepOutputs], None]
) -> None:
    """Decode the core's messages and pass each `StepOutputs` to `on_step` until the client is
    no longer alive, the core's sockets close, or they are closed under the loop (the core is
    being replaced)."""
    decode = core.codec.from_core.decode
    while True:
        try:
            if not core.output.poll(100):
                if not alive() or core.closed:
                    return
                continue
            raw = core.output.recv(copy=False)
        except zmq.ZMQError:  # the socket was closed under us: the core is being replaced
            return
        msg = decode(raw.buffer)
        if isinstance(msg, StepOutputs):
            try:
                on_step(msg)
            except Exception:  # a bug here must not silently stop every stream
                log.exception("could not process the engine core's outputs")


def hand_over(loop: asyncio.AbstractEventLoop, items: list) -> None:
    """(slot, output or exception) pairs into their readers' slots, on the readers' loop."""
    with contextlib.suppress(RuntimeError):  # the reader's loop is closed: nobody listens
        loop.call_soon_threadsafe(put_all, items)


def fail_requests(requests: Iterable[LiveRequest], exc: BaseException) -> None:
    """End every stream of `requests` with `exc`: one hand-over per event loop."""
    per_loop: dict[asyncio.AbstractEventLoop, list] = {}
    for live in requests:
        per_loop.setdefault(live.loop, []).append((live.slot, exc))
    for loop, items in per_loop.items():
        hand_over(loop, items)
