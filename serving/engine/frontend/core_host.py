"""`CoreHost`: the engine core started, watched and restarted by the parent of several API
processes (`VIGIL_API_SERVER_COUNT` > 1) rather than by one API client.

Each API process binds its own input PUSH and output PULL (fixed ipc paths in the parent's
directory, kept across core restarts); every core the host starts connects to all of them and to
the host's own control PUSH, through which the host sends `Shutdown`. When the core dies, the host
publishes `CoreDown` on a PUB socket every API process subscribes to (they fail their in-flight
requests at once and answer 503), and `CoreSupervisor` starts a new core with backoff; the API
processes learn it is back from its `CoreReady`.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import time
from multiprocessing.process import BaseProcess
from typing import Any

import zmq

from serving.engine.config import EngineConfig
from serving.engine.frontend.core_handle import CoreStartError
from serving.engine.frontend.core_process import CoreLaunch, run_engine_core
from serving.engine.frontend.messages import Codec, CoreDown, Shutdown
from serving.engine.frontend.supervisor import CoreSupervisor

log = logging.getLogger(__name__)


class HostedCore:
    """One engine-core process the host started (a `WatchedCore`), and its ready event."""

    def __init__(self, process: BaseProcess, generation: int, ready: Any):
        self.process, self.generation, self.ready = process, generation, ready

    @property
    def pid(self) -> int | None:
        return self.process.pid


class CoreHost:
    def __init__(
        self,
        config: EngineConfig,
        input_addresses: list[str],
        output_addresses: list[str],
        directory: str,
        ready_timeout_s: float = 900.0,
    ):
        self.config = config
        self.input_addresses, self.output_addresses = list(input_addresses), list(output_addresses)
        self.ready_timeout_s = ready_timeout_s
        self.control_address = f"ipc://{directory}/control"
        self.events_address = f"ipc://{directory}/events"
        self.ctx = zmq.Context(io_threads=1)
        self.control = self.ctx.socket(zmq.PUSH)
        self.control.setsockopt(zmq.LINGER, 0)
        self.control.bind(self.control_address)
        self.events = self.ctx.socket(zmq.PUB)
        self.events.setsockopt(zmq.LINGER, 0)
        self.events.bind(self.events_address)
        self.codec = Codec()
        self._mp = multiprocessing.get_context("spawn")  # never fork a process that has threads
        self._core: HostedCore | None = None
        self._generation = 0
        self.closing = False
        self.auto_restart = True
        self.supervisor = CoreSupervisor(self)

    @property
    def core(self) -> HostedCore | None:
        return self._core

    @property
    def core_pid(self) -> int | None:
        return self._core.pid if self._core is not None else None

    def spawn(self) -> HostedCore:
        """Start a core process (it connects to every API process); do not wait for it."""
        ready = self._mp.Event()
        launch = CoreLaunch(
            self.config,
            self.input_addresses + [self.control_address],
            self.output_addresses,
            os.getpid(),
            generation=self._generation,
            ready=ready,
        )
        process = self._mp.Process(
            target=run_engine_core,
            args=(launch,),
            daemon=True,
            name=f"vigil-engine-core-{self._generation}",
        )
        process.start()
        self._core = HostedCore(process, self._generation, ready)
        self._generation += 1
        return self._core

    def wait_ready(self, core: HostedCore, timeout_s: float | None = None) -> None:
        """Block until the core has loaded the model. Raises CoreStartError."""
        timeout_s = self.ready_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if core.ready.wait(0.2):
                return
            if not core.process.is_alive():
                raise CoreStartError(
                    f"the engine core exited with code {core.process.exitcode} "
                    "before it was ready (see the log)"
                )
        raise CoreStartError(f"the engine core was not ready within {timeout_s:.0f}s")

    def start_watching(self) -> None:
        self.supervisor.start()

    # ---- the CoreOwner side: called by CoreSupervisor -----------------------------------------
    def launch_core(self) -> None:
        core = self.spawn()
        try:
            self.wait_ready(core)
        except BaseException:
            core.process.kill()
            core.process.join(5)
            raise

    def on_core_death(self, core: HostedCore) -> None:
        """Tell every API process: they fail their in-flight requests and answer 503."""
        msg = CoreDown(core.generation, core.process.exitcode)
        self.events.send(self.codec.encoder.encode(msg))
        self.supervisor.notify(False)

    # ---- shutdown ----------------------------------------------------------------------------
    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Ask the core to stop (the API processes are gone by now), kill it past `timeout_s`."""
        self.closing = True
        core = self._core
        if core is not None and core.process.is_alive():
            with contextlib.suppress(zmq.ZMQError):  # zmq.Again: not connected (still loading)
                self.control.send(self.codec.encoder.encode(Shutdown()), zmq.NOBLOCK)
            core.process.join(timeout_s)
            if core.process.is_alive():
                log.warning("engine core did not stop within %.0fs; killing it", timeout_s)
                core.process.kill()
                core.process.join(5)
        self.supervisor.join(5)
        self.control.close(linger=0)
        self.events.close(linger=0)
        self.ctx.term()
