"""`CoreSupervisor`: a thread that watches the engine-core process for whoever started it: the
API process's `EngineCoreClient`, or, with several API processes, the parent's `CoreHost`.

When the core exits without being asked to, the owner fails every request in flight at once
(they never hang) or tells the API processes to, health listeners hear "down" (/health answers
503), and a new core is started, retried with backoff until it loads; listeners then hear "up".
Both owners meet the supervisor through `CoreOwner`.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from typing import Generic, Protocol, TypeVar

log = logging.getLogger(__name__)

POLL_S = 0.2  # how often the thread looks at the process (a join with a timeout)


class WatchedCore(Protocol):
    """One engine-core process as its owner holds it."""

    @property
    def process(self) -> BaseProcess: ...

    @property
    def pid(self) -> int | None: ...


Core = TypeVar("Core", bound=WatchedCore)


class CoreOwner(Protocol[Core]):
    """Whoever starts the core: `EngineCoreClient` (one API process) or `CoreHost` (the parent
    of several)."""

    auto_restart: bool
    closing: bool  # shutting down: the core's exit is expected, nothing to restart

    @property
    def core(self) -> Core | None: ...

    @property
    def core_pid(self) -> int | None: ...

    def launch_core(self) -> None:
        """Start a new core and wait until it is ready; raise if it cannot load."""

    def on_core_death(self, core: Core) -> None:
        """Fail the dead core's requests (or have the API processes fail theirs)."""


class HealthListeners(list[Callable[[bool], None]]):
    """Who hears `False` when the engine core goes down and `True` when it is back."""

    def notify(self, up: bool) -> None:
        for listener in list(self):
            try:
                listener(up)
            except Exception:
                log.exception("engine health listener failed")


class CoreSupervisor(Generic[Core]):
    def __init__(self, owner: CoreOwner[Core]):
        self.owner = owner
        self.listeners = HealthListeners()
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
        core = self.owner.core
        if core is not None and core.process.is_alive():
            core.process.kill()

    def join(self, timeout: float) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        owner = self.owner
        while not owner.closing and not self._exiting:
            core = owner.core
            if core is None:
                return
            core.process.join(POLL_S)
            if owner.closing or self._exiting or core.process.is_alive():
                continue
            log.error(
                "engine core (pid %s) exited with code %s; failing its requests",
                core.pid,
                core.process.exitcode,
            )
            owner.on_core_death(core)
            if not owner.auto_restart:
                return
            self._restart()

    def _restart(self) -> None:
        delay = 1.0
        while not self.owner.closing:
            try:
                self.owner.launch_core()
            except Exception:
                log.exception("could not restart the engine core; retrying in %.0fs", delay)
                time.sleep(delay)
                delay = min(30.0, delay * 2)
                continue
            self.restarts += 1
            log.warning("engine core restarted (pid %s)", self.owner.core_pid)
            self.notify(True)
            return

    def notify(self, up: bool) -> None:
        self.listeners.notify(up)
