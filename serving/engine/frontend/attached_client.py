"""`AttachedCoreClient`: one of several API processes feeding an engine core it did not start.

With `VIGIL_API_SERVER_COUNT` > 1 the parent process (serving/server/processes/multi_process.py)
owns the core (`CoreHost`). This client binds its own input PUSH and output PULL on paths the parent
chose (the same for every core the parent starts), tags its requests with its index so the core
routes their outputs back here, and subscribes to the parent's events. It never starts, stops or
supervises the core: on `CoreDown` it fails its in-flight requests with EngineDeadError and its
health listeners hear "down"; a `CoreReady` of a later generation means "up" again.
Requests, outputs and aborts work as in `EngineCoreClient`: both hold a `CoreRequests`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass

import zmq

from serving.engine.config import EngineConfig
from serving.engine.frontend.async_engine import EngineNotRunningError
from serving.engine.frontend.core_front import CoreClientFront
from serving.engine.frontend.core_handle import CoreStartError, CoreUnavailable, push
from serving.engine.frontend.core_requests import CoreRequests, core_died
from serving.engine.frontend.messages import (
    Codec,
    CoreDown,
    CoreFailed,
    CoreReady,
    StepOutputs,
    ToCore,
)
from serving.engine.frontend.supervisor import HealthListeners

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CoreAttachment:
    """Where API process `index` meets the core: addresses in the parent's directory."""

    index: int
    input_address: str  # this process binds a PUSH; every core PULLs from it
    output_address: str  # this process binds a PULL; every core PUSHes this process's outputs
    events_address: str  # the parent's PUB: CoreDown


class CoreLink:
    """The bound sockets: this client's `CoreChannel`."""

    def __init__(self, attachment: CoreAttachment):
        self.ctx = zmq.Context(io_threads=1)
        self.input = self.ctx.socket(zmq.PUSH)
        self.output = self.ctx.socket(zmq.PULL)
        self.events = self.ctx.socket(zmq.SUB)
        for sock in (self.input, self.output, self.events):
            sock.setsockopt(zmq.LINGER, 0)
        self.input.bind(attachment.input_address)
        self.output.bind(attachment.output_address)
        self.events.setsockopt(zmq.SUBSCRIBE, b"")
        self.events.connect(attachment.events_address)
        self.codec = Codec()
        self._send_lock = threading.Lock()  # zmq sockets are not thread-safe
        self.closed = False
        self.pid: int | None = None  # the current core's
        self.generation = -1  # the current core's; -1: none ready yet

    def is_alive(self) -> bool:
        return not self.closed

    def send(self, msg: ToCore) -> None:
        """Raises CoreUnavailable if no core takes it now (never blocks)."""
        with self._send_lock:
            if self.closed:
                raise CoreUnavailable("the engine core link is closed")
            push(self.input, self.codec, msg)

    def close(self) -> None:
        with self._send_lock:
            if self.closed:
                return
            self.closed = True
        for sock in (self.input, self.output, self.events):
            sock.close(linger=0)
        self.ctx.term()


class AttachedCoreClient(CoreClientFront):
    def __init__(
        self, config: EngineConfig, attachment: CoreAttachment, *, ready_timeout_s: float = 900.0
    ):
        self.config, self.attachment = config, attachment
        self.ready_timeout_s = ready_timeout_s
        self.session = CoreRequests(attachment.index)
        self.health = HealthListeners()
        self.closing = False
        self._output_thread: threading.Thread | None = None
        self._link: CoreLink | None = None
        self._ready = threading.Event()
        self._failed: str | None = None

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Bind, then wait for the core's CoreReady (blocking: call off the loop)."""
        if self._link is not None:
            return
        self._link = CoreLink(self.attachment)
        self._output_thread = threading.Thread(
            target=self._receive_all,
            daemon=True,
            name=f"vigil-core-output-{self.attachment.index}",
        )
        self._output_thread.start()
        deadline = time.monotonic() + self.ready_timeout_s
        while not self._ready.wait(0.2):
            if self._failed is not None:
                raise CoreStartError(self._failed)
            if time.monotonic() > deadline:
                raise CoreStartError(
                    f"the engine core was not ready within {self.ready_timeout_s:.0f}s"
                )
        self.session.accepting = True

    @property
    def core_pid(self) -> int | None:
        return self._link.pid if self._link is not None else None

    async def shutdown(self) -> None:
        """Stop accepting and end what is in flight; the core belongs to the parent."""
        self.session.accepting = False
        self.closing = True
        self.session.fail_all(EngineNotRunningError("the engine shut down"))
        if self._output_thread is not None:
            await asyncio.to_thread(self._output_thread.join, 10)
        self.session.mark_down()
        if self._link is not None:
            self._link.close()

    # ---- the output thread: the core's outputs and the parent's events ---------------------
    def _receive_all(self) -> None:
        link = self._link
        assert link is not None  # bound by start() before this thread runs
        poller = zmq.Poller()
        poller.register(link.output, zmq.POLLIN)
        poller.register(link.events, zmq.POLLIN)
        while not self.closing:
            try:
                ready = dict(poller.poll(100))
                if link.events in ready:
                    self._on_event(link.codec.from_parent.decode(link.events.recv()))
                if link.output in ready:
                    self._on_message(
                        link, link.codec.from_core.decode(link.output.recv(copy=False).buffer)
                    )
            except zmq.ZMQError:  # the sockets were closed under us: shutting down
                return
            except Exception:  # a bug here must not silently stop every stream
                log.exception("could not process the engine core's message")

    def _on_message(self, link: CoreLink, msg: object) -> None:
        if isinstance(msg, StepOutputs):
            if self.session.alive:  # a dead core's last words are not this one's
                self.session.on_step(link, msg)
        elif isinstance(msg, CoreReady):
            self._on_ready(link, msg)
        elif isinstance(msg, CoreFailed):
            log.error("engine core could not load the model: %s", msg.message)
            self._failed = msg.message

    def _on_ready(self, link: CoreLink, ready: CoreReady) -> None:
        if ready.generation <= link.generation:
            return
        restarted = link.generation >= 0
        link.generation, link.pid = ready.generation, ready.pid
        self.session.on_ready(link, ready)
        self._ready.set()
        if restarted:
            log.warning("engine core back (pid %s): serving again", ready.pid)
            self.health.notify(True)

    def _on_event(self, event: CoreDown) -> None:
        link = self._link
        assert link is not None
        if event.generation < link.generation or not self.session.alive:
            return  # about an older core than the one serving now
        log.error(
            "engine core (pid %s) exited with code %s; failing this process's requests",
            link.pid,
            event.exitcode,
        )
        self.session.mark_down()
        self.health.notify(False)
        self.session.fail_all(core_died())
