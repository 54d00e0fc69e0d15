"""`CoreSupervisor`: a thread that watches the engine-core process for whoever started it: the
API process's `EngineCoreClient`, or, with several API processes, the parent's `CoreHost`.

When the core exits without being asked to, the owner fails every request in flight at once
(they never hang) or tells the API processes to, health listeners hear "down" (/health answers
503), and a new core is started, retried with backoff until it loads; listeners then hear "up".
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

POLL_S = 0.2  # how often the thread looks at the process (a join with a timeout)


class CoreSupervisor:
    def __init__(self, client: Any):
        self.client = client  # EngineCoreClient or CoreHost: _core, _closing, _launch, _on_core_death
        self.listeners: list[Callable[[bool], None]] = []
        self.restarts = 0
        self._exiting = False  # the interpreter is exiting: multiprocessing ends the core itself
        self._thread = threading.Thread(target=self._run, name="vigil-core-supervisor", daemon=True)

    def start(self) -> None:
        # runs before multiprocessing's own exit hook (registered earlier)
        atexit.register(self._stop_watching)
        self._thread.start()

    def _stop_watching(self) -> None:
        """The interpreter is exiting: the core ignores SIGTERM (multiprocessing's way to end a
        child), so end it here or that hook would wait on it forever."""
        self._exiting = True
        core = self.client._core
        if core is not None and core.process.is_alive():
            core.process.kill()

    def join(self, timeout: float) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        client = self.client
        while not client._closing and not self._exiting:
            core = client._core
            if core is None:
                return
            core.process.join(POLL_S)
            if client._closing or self._exiting or core.process.is_alive():
                continue
            log.error("engine core (pid %s) exited with code %s; failing its requests",
                      core.pid, core.process.exitcode)
            client._on_core_death(core)
            if not client.auto_restart:
                return
            self._restart()

    def _restart(self) -> None:
        delay = 1.0
        while not self.client._closing:
            try:
                self.client._launch()
            except Exception:
                log.exception("could not restart the engine core; retrying in %.0fs", delay)
                time.sleep(delay)
                delay = min(30.0, delay * 2)
                continue
            self.restarts += 1
            log.warning("engine core restarted (pid %s)", self.client.core_pid)
            self.notify(True)
            return

    def notify(self, up: bool) -> None:
        for listener in list(self.listeners):
            try:
                listener(up)
            except Exception:
                log.exception("engine health listener failed")
