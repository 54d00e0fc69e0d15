"""`EngineCoreClient`: the API process's engine when the engine core runs in its own process.

An `EngineClient`, like AsyncLLMEngine, so the server does not care which it has. One output thread
receives the core's per-step message, folds
every request's new tokens into text (`fold_step`: detokenizer + stop strings) and hands each
event loop its outputs in one `call_soon_threadsafe`; requests a stop string finished are
aborted in the core in one message. A supervisor thread watches the core process: when it dies,
every request in flight fails with EngineDeadError (never hangs), health listeners hear
"down", a new core is started, and listeners hear "up" once it is ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from serving.engine.config import EngineConfig
from serving.engine.core.request_checks import check_new_request
from serving.engine.frontend.async_engine import EngineNotRunningError
from serving.engine.frontend.core_handle import CoreChannel, CoreHandle, CoreUnavailable
from serving.engine.frontend.identity import UNKNOWN, EngineIdentity
from serving.engine.frontend.messages import AbortRequests, AddRequest, Shutdown, StepOutputs
from serving.engine.frontend.output_slot import OutputSlot, read_slot
from serving.engine.frontend.request_text import FrontRequest
from serving.engine.frontend.stats_mirror import StatsMirror
from serving.engine.frontend.step_fold import LiveRequest, fold_step
from serving.engine.frontend.step_receiver import fail_requests, hand_over, receive_steps
from serving.engine.frontend.supervisor import CoreSupervisor
from serving.outputs import EngineStats, RequestOutput
from serving.sampling_params import SamplingParams


class EngineDeadError(RuntimeError):
    """The engine-core process died while the request was in flight."""


class EngineCoreClient:
    coalesces_outputs = True  # a slow reader gets the newest output, never a queue
    client_index = 0  # this API process among several feeding one core (AttachedCoreClient)

    def __init__(
        self,
        config: EngineConfig,
        loaded: Any = None,
        *,
        auto_restart: bool = True,
        ready_timeout_s: float = 900.0,
    ):
        self.config, self._loaded = config, loaded
        self.auto_restart, self.ready_timeout_s = auto_restart, ready_timeout_s
        self._lock = threading.Lock()  # guards _requests and the liveness flags
        self._requests: dict[str, LiveRequest] = {}
        self._core: CoreHandle | None = None  # the core this client started and supervises
        self._channel: CoreChannel | None = None  # where requests go: that core's sockets
        self._generation = 0
        self._alive = False
        self._accepting = False
        self.closing = False  # shutting down: the core's exit is expected
        self._mirror = StatsMirror()
        self._output_thread: threading.Thread | None = None
        self.supervisor: CoreSupervisor[CoreHandle] = CoreSupervisor(self)
        self.tokenizer: Any = None
        self.max_model_len = 0
        self.vocab_size = 0
        self.device = "?"
        self.core_frozen_objects = 0  # as the running core reported it (serving/heap.py)
        self._identity = UNKNOWN

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Spawn the core and wait until its model is loaded (blocking: call off the loop)."""
        if self._core is not None:
            return
        self.launch_core()
        self._accepting = True
        self.supervisor.start()

    def launch_core(self) -> None:
        """Start a core and wait until it is ready (the supervisor's restart calls this too)."""
        core = CoreHandle(self.config, self._loaded, self._generation)
        self._generation += 1
        try:
            ready = core.wait_ready(self.ready_timeout_s)
        except BaseException:
            core.stop(timeout_s=0)
            raise
        if self.tokenizer is None:  # the same model on every restart
            self.tokenizer = pickle.loads(ready.tokenizer_pickle)
        self.max_model_len, self.vocab_size, self.device = (
            ready.max_model_len,
            ready.vocab_size,
            ready.device,
        )
        self.core_frozen_objects = ready.frozen_objects
        self._identity = EngineIdentity(ready.device, ready.dtype, ready.attention)
        with self._lock:
            self._core = self._channel = core
            self._mirror.restart()
            self._alive = True
        self._output_thread = threading.Thread(
            target=self._receive,
            args=(core,),
            daemon=True,
            name=f"vigil-core-output-{core.generation}",
        )
        self._output_thread.start()

    def identity(self) -> EngineIdentity:
        """Device, dtype and attention backend, as the core reported them when it was ready."""
        return self._identity

    @property
    def is_running(self) -> bool:
        return self._alive and self._channel is not None and self._channel.is_alive()

    @property
    def core(self) -> CoreHandle | None:
        return self._core

    @property
    def core_pid(self) -> int | None:
        return self._core.pid if self._core is not None else None

    def add_health_listener(self, listener: Callable[[bool], None]) -> None:
        """`listener(False)` when the core dies, `listener(True)` when a new one is ready
        (called on the supervisor thread)."""
        self.supervisor.listeners.append(listener)

    def remove_health_listener(self, listener: Callable[[bool], None]) -> None:
        if listener in self.supervisor.listeners:
            self.supervisor.listeners.remove(listener)

    async def shutdown(self) -> None:
        """Stop accepting, abort what is in flight, stop the core process and the threads."""
        self._accepting = False
        self.closing = True
        core = self._core
        if core is not None:
            with contextlib.suppress(CoreUnavailable):
                core.send(Shutdown())  # the core aborts its requests, reports them, exits
            await asyncio.to_thread(self._stop_core, core)
        self._fail_all(EngineNotRunningError("the engine shut down"))
        await asyncio.to_thread(self.supervisor.join, 10)

    def _stop_core(self, core: CoreHandle) -> None:
        core.process.join(10)
        with self._lock:
            self._alive = False
        if self._output_thread is not None:
            self._output_thread.join(10)
        core.stop(timeout_s=0)

    async def wait_idle(self, poll_s: float = 0.01) -> None:
        while self._requests:
            await asyncio.sleep(poll_s)

    async def drain(self, timeout: float) -> bool:
        self._accepting = False
        try:
            await asyncio.wait_for(self.wait_idle(), timeout)
            return True
        except TimeoutError:
            for rid in list(self._requests):
                self.abort(rid)
            await self.wait_idle()
            return False

    # ---- requests --------------------------------------------------------------------------
    def validate_request(
        self, request_id: str, prompt_token_ids: list[int], params: SamplingParams
    ) -> None:
        """The engine's own checks, answered here (the core repeats them)."""
        check_new_request(
            request_id,
            prompt_token_ids,
            params,
            in_use=self._requests,
            vocab_size=self.vocab_size,
            max_model_len=self.max_model_len,
        )

    async def generate(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        params: SamplingParams,
        prompt: str | None = None,
    ) -> AsyncIterator[RequestOutput]:
        if not self._accepting:
            raise EngineNotRunningError(
                "the engine is not accepting requests (not started or shutting down)"
            )
        ids = list(prompt_token_ids)
        arrival = time.monotonic()
        with self._lock:
            if not self._alive or self._channel is None:
                raise EngineNotRunningError("the engine core is restarting; retry shortly")
            self.validate_request(request_id, ids, params)
            live = LiveRequest(
                FrontRequest(request_id, prompt, ids, params, self.tokenizer, arrival),
                OutputSlot(),
                asyncio.get_running_loop(),
            )
            self._requests[request_id] = live
            channel = self._channel
            self._mirror.adds_sent += 1
        try:
            channel.send(AddRequest(request_id, ids, params, arrival, self.client_index))
        except CoreUnavailable as exc:
            with self._lock:
                self._requests.pop(request_id, None)
            raise EngineNotRunningError(str(exc)) from None
        # closed with this generator, so a reader that goes away aborts at once
        async with contextlib.aclosing(
            read_slot(live.slot, lambda: self.abort(request_id))
        ) as outputs:
            async for out in outputs:
                yield out

    def abort(self, request_id: str) -> None:
        """Thread-safe; the request's stream ends with a finish_reason 'abort' output."""
        channel = self._channel
        try:
            if channel is None or not self._alive:
                raise CoreUnavailable("no core")
            channel.send(AbortRequests([request_id]))
        except CoreUnavailable:  # nobody to ask: end the stream here
            with self._lock:
                live = self._requests.pop(request_id, None)
            if live is not None:
                hand_over(live.loop, [(live.slot, live.front.abort())])

    def stats(self) -> EngineStats:
        return self._mirror.stats()

    def num_waiting(self) -> int:
        return self._mirror.num_waiting()

    def num_running(self) -> int:
        return self._mirror.num_running()

    # ---- the output thread -----------------------------------------------------------------
    def _receive(self, core: CoreHandle) -> None:
        receive_steps(core, lambda: self._alive, lambda msg: self._on_step(core, msg))

    def _on_step(self, channel: CoreChannel, msg: StepOutputs) -> None:
        with self._lock:
            self._mirror.snapshot, self._mirror.adds_seen = msg.stats, msg.adds_seen
            per_loop, stop_aborts = fold_step(self._requests, msg)
        if stop_aborts:
            with contextlib.suppress(CoreUnavailable):
                channel.send(AbortRequests(stop_aborts))
        for loop, items in per_loop.items():
            hand_over(loop, items)

    # ---- when the core dies (called by the supervisor) ---------------------------------------
    def on_core_death(self, core: CoreHandle) -> None:
        with self._lock:
            self._alive = False
        self.supervisor.notify(False)
        if self._output_thread is not None:
            self._output_thread.join(5)
        core.close()
        self._fail_all(
            EngineDeadError(
                "the engine core process died; the request was lost (the server is restarting it)"
            )
        )

    def _fail_all(self, exc: BaseException) -> None:
        with self._lock:
            lost, self._requests = self._requests, {}
        fail_requests(lost.values(), exc)
