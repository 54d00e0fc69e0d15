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
import threading
from typing import TYPE_CHECKING

from serving.engine.config import EngineConfig
from serving.engine.frontend.async_engine import EngineNotRunningError
from serving.engine.frontend.core_front import CoreClientFront
from serving.engine.frontend.core_handle import CoreHandle, CoreUnavailable
from serving.engine.frontend.core_requests import CoreRequests, EngineDeadError, core_died
from serving.engine.frontend.messages import Shutdown
from serving.engine.frontend.step_receiver import receive_steps
from serving.engine.frontend.supervisor import CoreSupervisor

if TYPE_CHECKING:
    from serving.engine.engine.runner_setup import ModelInput

__all__ = ["EngineCoreClient", "EngineDeadError"]


class EngineCoreClient(CoreClientFront):
    def __init__(
        self,
        config: EngineConfig,
        loaded: ModelInput | None = None,
        *,
        auto_restart: bool = True,
        ready_timeout_s: float = 900.0,
    ):
        self.config, self._loaded = config, loaded
        self.auto_restart, self.ready_timeout_s = auto_restart, ready_timeout_s
        self.session = CoreRequests()
        self._core: CoreHandle | None = None  # the core this client started and supervises
        self._generation = 0
        self.closing = False  # shutting down: the core's exit is expected
        self._output_thread: threading.Thread | None = None
        self.supervisor: CoreSupervisor[CoreHandle] = CoreSupervisor(self)
        self.health = self.supervisor.listeners
        self.core_frozen_objects = 0  # as the running core reported it (serving/heap.py)

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Spawn the core and wait until its model is loaded (blocking: call off the loop)."""
        if self._core is not None:
            return
        self.launch_core()
        self.session.accepting = True
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
        self.core_frozen_objects = ready.frozen_objects
        self._core = core
        self.session.on_ready(core, ready)
        self._output_thread = threading.Thread(
            target=self._receive,
            args=(core,),
            daemon=True,
            name=f"vigil-core-output-{core.generation}",
        )
        self._output_thread.start()

    @property
    def core(self) -> CoreHandle | None:
        return self._core

    @property
    def core_pid(self) -> int | None:
        return self._core.pid if self._core is not None else None

    async def shutdown(self) -> None:
        """Stop accepting, abort what is in flight, stop the core process and the threads."""
        self.session.accepting = False
        self.closing = True
        core = self._core
        if core is not None:
            with contextlib.suppress(CoreUnavailable):
                core.send(Shutdown())  # the core aborts its requests, reports them, exits
            await asyncio.to_thread(self._stop_core, core)
        self.session.fail_all(EngineNotRunningError("the engine shut down"))
        await asyncio.to_thread(self.supervisor.join, 10)

    def _stop_core(self, core: CoreHandle) -> None:
        core.process.join(10)
        self.session.mark_down()
        if self._output_thread is not None:
            self._output_thread.join(10)
        core.stop(timeout_s=0)

    # ---- the output thread -----------------------------------------------------------------
    def _receive(self, core: CoreHandle) -> None:
        session = self.session
        receive_steps(core, lambda: session.alive, lambda msg: session.on_step(core, msg))

    # ---- when the core dies (called by the supervisor) ---------------------------------------
    def on_core_death(self, core: CoreHandle) -> None:
        self.session.mark_down()
        self.supervisor.notify(False)
        if self._output_thread is not None:
            self._output_thread.join(5)
        core.close()
        self.session.fail_all(core_died())
