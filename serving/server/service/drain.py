"""Graceful drain: /health turns 503 and new requests are refused (503), in-flight requests get
`drain_grace_s` to finish (then are aborted), the traffic logger and sample writer flush, the
engine stops, and only then is the HTTP server asked to exit."""

from __future__ import annotations

import asyncio
import logging
import time

from serving.server.base.state import Phase, ServerState

log = logging.getLogger(__name__)
ABORT_SETTLE_S = 5.0  # after aborting at the end of the grace: how long streams may take to end


class DrainController:
    def __init__(self, state: ServerState):
        self.state = state
        self.task: asyncio.Task | None = None
        self.finished = asyncio.Event()

    def begin(self) -> asyncio.Task:
        """Start draining (idempotent); call from the event loop's thread."""
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._run())
        return self.task

    async def _run(self) -> None:
        state = self.state
        state.phase = Phase.DRAINING
        grace = state.settings.drain_grace_s
        log.info("draining: %d request(s) in flight, up to %.1fs grace", len(state.inflight), grace)
        deadline = time.monotonic() + grace
        while state.inflight and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if state.inflight:
            log.warning("drain grace over: aborting %d request(s)", len(state.inflight))
            engine = state.loaded_engine()  # requests in flight: it is loaded
            for request_id in list(state.inflight):
                engine.abort(request_id)
            # let their streams send the final (abort) chunks and log them: the abort reaches
            # the engine between steps (in another process, over a socket), so wait for the
            # streams themselves, bounded
            settle = time.monotonic() + ABORT_SETTLE_S
            while state.inflight and time.monotonic() < settle:
                await asyncio.sleep(0.02)
        await close_resources(state)
        self.finished.set()
        if state.request_exit is not None:
            state.request_exit()


async def close_resources(state: ServerState, timeout: float = 30.0) -> None:
    """Flush sampled traffic into storage and stop the engine (idempotent)."""
    if state.closed:
        return
    state.closed = True
    if state.phase is not Phase.FAILED:  # keep the failure visible to run_server's exit code
        state.phase = Phase.STOPPED
    # the logger first (it feeds the writer), then the writer, which commits or journals
    flushed = await asyncio.to_thread(state.traffic.close, timeout)
    if not flushed:
        log.error("traffic logger did not flush within %.0fs", timeout)
    if state.writer is not None and state.owns_writer:
        await asyncio.to_thread(state.writer.close, timeout)
    if state.engine is not None and state.owns_engine:
        await state.engine.shutdown()
    if state.metrics is not None:
        # several API processes: this one's final counts, for the others' scrapes
        state.metrics.publish()
