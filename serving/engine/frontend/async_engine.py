"""`AsyncLLMEngine`: the engine loop in its own thread, streams to asyncio callers.

The event loop never runs model code: `generate()` validates, posts the request to the loop
thread's inbox and awaits an `OutputSlot` the loop thread feeds through `call_soon_threadsafe`
(one call per event loop per step). A slot holds one output: a reader that falls behind gets
the newest, with the deltas it missed folded in. If the caller stops iterating (client gone,
task cancelled) the request is aborted and its KV blocks freed.

This is the in-process `EngineClient` (`VIGIL_ENGINE_PROCESS=inprocess`);
`core_client.EngineCoreClient` runs the same engine in its own process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from serving.engine.core.request_checks import check_request_id
from serving.engine.engine.llm_engine import LLMEngine
from serving.engine.frontend.identity import EngineIdentity, identify
from serving.engine.frontend.output_slot import OutputSlot, read_slot
from serving.engine.frontend.stats_mirror import StatsMirror
from serving.outputs import EngineStats, RequestOutput
from serving.sampling_params import SamplingParams

log = logging.getLogger(__name__)


class EngineNotRunningError(RuntimeError):
    """The engine is not started, shutting down, or draining: no new requests."""


class EngineStepError(RuntimeError):
    """An engine step failed: the requests in it were aborted (the engine keeps serving)."""


@dataclass
class _Stream:
    loop: asyncio.AbstractEventLoop
    slot: OutputSlot


class AsyncLLMEngine:
    coalesces_outputs = True  # a slow reader gets the newest output, never a queue

    def __init__(self, engine: LLMEngine[RequestOutput], idle_poll_s: float = 0.05):
        self.engine = engine
        self.idle_poll_s = idle_poll_s
        self._lock = threading.Lock()  # guards _inbox and _streams
        self._inbox: list[tuple] = []
        # a request taken from the inbox stays counted as waiting until a snapshot includes it
        self._mirror = StatsMirror(engine.stats())
        self._streams: dict[str, _Stream] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._accepting = False
        self._busy = False  # the loop thread holds unfinished requests

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        self._accepting = True
        self._thread = threading.Thread(target=self._run, name="vigil-engine-loop", daemon=True)
        self._thread.start()

    def identity(self) -> EngineIdentity:
        return identify(self.engine)

    @property
    def tokenizer(self) -> Any:
        return self.engine.tokenizer

    @property
    def max_model_len(self) -> int:
        return self.engine.max_model_len

    def add_health_listener(self, listener: Callable[[bool], None]) -> None:
        """The engine lives and dies with this process: it is never down while anyone listens."""

    def remove_health_listener(self, listener: Callable[[bool], None]) -> None:
        """Nothing was registered (see add_health_listener)."""

    @property
    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    async def shutdown(self) -> None:
        """Stop accepting, abort what is in flight, stop the loop thread."""
        self._accepting = False
        for rid in list(self._streams):
            self.abort(rid)
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)
            self._thread = None

    async def wait_idle(self, poll_s: float = 0.01) -> None:
        """Return once no request is queued or running."""
        while self._busy or self._inbox or self._streams:
            await asyncio.sleep(poll_s)

    async def drain(self, timeout: float) -> bool:
        """Graceful shutdown's first half: refuse new requests, let running ones finish for up
        to `timeout` seconds, then abort the rest. True when everything finished on its own."""
        self._accepting = False
        try:
            await asyncio.wait_for(self.wait_idle(), timeout)
            return True
        except TimeoutError:
            for rid in list(self._streams):
                self.abort(rid)
            await self.wait_idle()
            return False

    # ---- requests --------------------------------------------------------------------------
    async def generate(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        params: SamplingParams,
        prompt: str | None = None,
    ) -> AsyncIterator[RequestOutput]:
        """Stream the request's outputs until the finished one. Raises ValueError for a bad
        request (before anything is queued) and EngineNotRunningError when not accepting."""
        if not self._accepting or not self.is_running:
            raise EngineNotRunningError(
                "the engine is not accepting requests (not started or shutting down)"
            )
        with self._lock:
            check_request_id(request_id, self._streams)  # queued, not yet in the engine
            self.engine.validate_request(request_id, prompt_token_ids, params)
            stream = _Stream(asyncio.get_running_loop(), OutputSlot())
            self._streams[request_id] = stream
            self._inbox.append(
                ("add", request_id, list(prompt_token_ids), params, prompt, time.monotonic())
            )
            self._mirror.adds_sent += 1
        self._wake.set()
        # closed with this generator, so a reader that goes away aborts at once
        async with contextlib.aclosing(
            read_slot(stream.slot, lambda: self.abort(request_id))
        ) as outputs:
            async for out in outputs:
                yield out

    def abort(self, request_id: str) -> None:
        """Thread-safe; the request's stream (if any) ends with a finish_reason 'abort' output."""
        with self._lock:
            self._inbox.append(("abort", request_id))
        self._wake.set()

    def validate_request(
        self, request_id: str, prompt_token_ids: list[int], params: SamplingParams
    ) -> None:
        self.engine.validate_request(request_id, prompt_token_ids, params)

    def stats(self) -> EngineStats:
        return self._mirror.stats()

    def num_waiting(self) -> int:
        return self._mirror.num_waiting()

    def num_running(self) -> int:
        return self._mirror.num_running()

    # ---- the loop thread -------------------------------------------------------------------
    def _run(self) -> None:
        reason = "the engine shut down"
        try:
            self._loop()
        except BaseException:  # a bug in the loop itself: never leave callers waiting forever
            log.exception("engine loop died")
            reason = "the engine loop died (see the server log)"
        finally:
            self._accepting = False
            self._fail_all(EngineNotRunningError(reason), drop_queued=True)
            self._busy = False

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._handle_inbox()
            if self.engine.has_unfinished_requests():
                self._busy = True
                try:
                    outputs = self.engine.step()
                except (
                    Exception
                ) as exc:  # keep serving: fail the requests in flight, not the process
                    log.exception("engine step failed; aborting the requests in flight")
                    self._fail_all(
                        EngineStepError(f"the engine step failed: {type(exc).__name__}: {exc}")
                    )
                    outputs = []
                self._deliver_step(outputs)
                self._mirror.snapshot = self.engine.stats()
            else:
                self._busy = False
                self._mirror.snapshot = self.engine.stats()
                self._wake.wait(self.idle_poll_s)
                self._wake.clear()
        self._handle_inbox()

    def _handle_inbox(self) -> None:
        with self._lock:
            cmds, self._inbox = self._inbox, []
        added = 0
        for cmd in cmds:
            if cmd[0] == "add":
                added += 1
                _, rid, ids, params, prompt, arrival = cmd
                try:
                    self.engine.add_request(rid, ids, params, prompt=prompt, arrival_time=arrival)
                except Exception as exc:  # ValueError (raced validation) or worse: tell the caller
                    self._deliver(rid, exc, True)
            else:
                out = self.engine.abort(cmd[1])
                if out is not None:
                    self._deliver(cmd[1], out, True)
        if added:  # the snapshot first: a reader in between counts these twice, never not at all
            self._mirror.snapshot = self.engine.stats()
            self._mirror.adds_seen += added

    def _fail_all(self, exc: BaseException, drop_queued: bool = False) -> None:
        """Abort the engine's requests and raise `exc` in their callers; when the loop is ending
        (`drop_queued`), in every other waiting caller too."""
        targets = set(self.engine.requests)
        for rid in targets:
            with contextlib.suppress(Exception):
                self.engine.abort(rid)
        if drop_queued:
            with self._lock:
                self._mirror.adds_seen += sum(
                    1 for cmd in self._inbox if cmd[0] == "add"
                )  # dropped
                self._inbox = [cmd for cmd in self._inbox if cmd[0] != "add"]
                targets |= set(self._streams)
        for rid in targets:
            self._deliver(rid, exc, True)

    def _deliver(self, request_id: str, item, last: bool) -> None:
        with self._lock:
            stream = self._streams.pop(request_id, None) if last else self._streams.get(request_id)
        if stream is not None:
            # RuntimeError: the caller's event loop is closed, nobody is listening
            with contextlib.suppress(RuntimeError):
                stream.loop.call_soon_threadsafe(stream.slot.put, item)

    def _deliver_step(self, outputs: list[RequestOutput]) -> None:
        """A step's outputs, handed to each event loop in one call."""
        per_loop: dict[asyncio.AbstractEventLoop, list] = {}
        with self._lock:
            for out in outputs:
                rid = out.request_id
                stream = self._streams.pop(rid, None) if out.finished else self._streams.get(rid)
                if stream is not None:
                    per_loop.setdefault(stream.loop, []).append((stream.slot, out))
        for loop, items in per_loop.items():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(put_all, items)


def put_all(items: list[tuple[OutputSlot, RequestOutput | BaseException]]) -> None:
    for slot, item in items:
        slot.put(item)
