"""`CoreRequests`: the requests one API process has in flight at an engine core in another
process, and what that process knows of the core (tokenizer, limits, identity, stats).

Both core front-ends hold one: `EngineCoreClient` (a core it starts and supervises) and
`AttachedCoreClient` (a core a parent process owns). They differ in how the core comes and goes;
requests, outputs, aborts and failures work the same, here.
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import threading
import time
from typing import Any

from serving.engine.core.request_checks import check_new_request
from serving.engine.frontend.async_engine import EngineNotRunningError
from serving.engine.frontend.core_handle import CoreChannel, CoreUnavailable
from serving.engine.frontend.identity import UNKNOWN, EngineIdentity
from serving.engine.frontend.messages import AbortRequests, AddRequest, CoreReady, StepOutputs
from serving.engine.frontend.output_slot import OutputSlot
from serving.engine.frontend.request_text import FrontRequest
from serving.engine.frontend.stats_mirror import StatsMirror
from serving.engine.frontend.step_fold import LiveRequest, fold_step
from serving.engine.frontend.step_receiver import fail_requests, hand_over
from serving.sampling_params import SamplingParams


class EngineDeadError(RuntimeError):
    """The engine-core process died while the request was in flight."""


def core_died() -> EngineDeadError:
    return EngineDeadError(
        "the engine core process died; the request was lost (the server is restarting it)"
    )


class CoreRequests:
    def __init__(self, client_index: int = 0) -> None:
        self.client_index = client_index  # this API process among several feeding one core
        self.lock = threading.Lock()  # guards `live` and the liveness flags
        self.live: dict[str, LiveRequest] = {}
        self.channel: CoreChannel | None = None  # where requests go now
        self.alive = False  # a ready core is there
        self.accepting = False  # new requests are taken (false before start, while shutting down)
        self.mirror = StatsMirror()
        self.tokenizer: Any = None
        self.max_model_len = 0
        self.vocab_size = 0
        self.device = "?"
        self.identity = UNKNOWN

    # ---- the core comes and goes -------------------------------------------------------------
    def on_ready(self, channel: CoreChannel, ready: CoreReady) -> None:
        """A core is ready behind `channel`: requests go there from now on."""
        if self.tokenizer is None:  # the same model on every restart
            self.tokenizer = pickle.loads(ready.tokenizer_pickle)
        self.max_model_len, self.vocab_size, self.device = (
            ready.max_model_len,
            ready.vocab_size,
            ready.device,
        )
        self.identity = EngineIdentity(ready.device, ready.dtype, ready.attention)
        with self.lock:
            self.channel = channel
            self.mirror.restart()
            self.alive = True

    def mark_down(self) -> None:
        with self.lock:
            self.alive = False

    @property
    def is_running(self) -> bool:
        return self.alive and self.channel is not None and self.channel.is_alive()

    def fail_all(self, exc: BaseException) -> None:
        """End every stream in flight with `exc`."""
        with self.lock:
            lost, self.live = self.live, {}
        fail_requests(lost.values(), exc)

    # ---- requests ----------------------------------------------------------------------------
    def validate_request(
        self, request_id: str, prompt_token_ids: list[int], params: SamplingParams
    ) -> None:
        """The engine's own checks, answered here (the core repeats them)."""
        check_new_request(
            request_id,
            prompt_token_ids,
            params,
            in_use=self.live,
            vocab_size=self.vocab_size,
            max_model_len=self.max_model_len,
        )

    def submit(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        params: SamplingParams,
        prompt: str | None = None,
    ) -> LiveRequest:
        """Check the request, register it and send it to the core; its outputs arrive in the
        returned request's slot. Raises EngineNotRunningError (no core) or ValueError."""
        if not self.accepting:
            raise EngineNotRunningError(
                "the engine is not accepting requests (not started or shutting down)"
            )
        ids = list(prompt_token_ids)
        arrival = time.monotonic()
        with self.lock:
            if not self.alive or self.channel is None:
                raise EngineNotRunningError("the engine core is restarting; retry shortly")
            self.validate_request(request_id, ids, params)
            live = LiveRequest(
                FrontRequest(request_id, prompt, ids, params, self.tokenizer, arrival),
                OutputSlot(),
                asyncio.get_running_loop(),
            )
            self.live[request_id] = live
            channel = self.channel
            self.mirror.adds_sent += 1
        try:
            channel.send(AddRequest(request_id, ids, params, arrival, self.client_index))
        except CoreUnavailable as exc:
            with self.lock:
                self.live.pop(request_id, None)
            raise EngineNotRunningError(str(exc)) from None
        return live

    def abort(self, request_id: str) -> None:
        """Thread-safe; the request's stream ends with a finish_reason 'abort' output."""
        channel = self.channel
        try:
            if channel is None or not self.alive:
                raise CoreUnavailable("no core")
            channel.send(AbortRequests([request_id]))
        except CoreUnavailable:  # nobody to ask: end the stream here
            with self.lock:
                live = self.live.pop(request_id, None)
            if live is not None:
                hand_over(live.loop, [(live.slot, live.front.abort())])

    async def wait_idle(self, poll_s: float = 0.01) -> None:
        while self.live:
            await asyncio.sleep(poll_s)

    async def drain(self, timeout: float) -> bool:
        self.accepting = False
        try:
            await asyncio.wait_for(self.wait_idle(), timeout)
            return True
        except TimeoutError:
            for rid in list(self.live):
                self.abort(rid)
            await self.wait_idle()
            return False

    # ---- outputs (the output thread) ---------------------------------------------------------
    def on_step(self, channel: CoreChannel, msg: StepOutputs) -> None:
        with self.lock:
            self.mirror.snapshot, self.mirror.adds_seen = msg.stats, msg.adds_seen
            per_loop, stop_aborts = fold_step(self.live, msg)
        if stop_aborts:
            with contextlib.suppress(CoreUnavailable):
                channel.send(AbortRequests(stop_aborts))
        for loop, items in per_loop.items():
            hand_over(loop, items)
