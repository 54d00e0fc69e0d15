"""A parent's group of serving processes (API processes of `vigil serve`, workers of `vigil
proxy`): signals forwarded, a dead member ends the group, a bounded drain at the end.

- SIGTERM/SIGINT go to every member (a second one too: they stop without waiting).
- A member that exits on its own ends the group: the others drain, the parent exits 1 for the
  service manager to restart it.
- Ending waits the drain grace plus `STOP_EXTRA_S` for each member, then kills what is left.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import time

from vigil.config import Settings

log = logging.getLogger("vigil.serve")

POLL_S = 0.1
STOP_EXTRA_S = 15.0  # past the drain grace: how long a member may take to exit


class ProcessGroup:
    """The members in `processes` (started by the caller) and the parent's signal handling."""

    what = "processes"  # for the log: "forwarding to the <what>"
    drained_codes: frozenset[int] = frozenset({0})  # exit codes of a member that drained

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.signals = 0
        self.processes: list[multiprocessing.process.BaseProcess] = []

    def on_signal(self, sig: int, frame: object) -> None:
        self.signals += 1
        log.info(
            "signal %s: forwarding to the %s%s",
            signal.Signals(sig).name,
            self.what,
            "" if self.signals == 1 else " (again: they stop without waiting)",
        )
        self.terminate()

    def terminate(self) -> None:
        for process in self.processes:
            if process.pid is not None and process.is_alive():
                os.kill(process.pid, signal.SIGTERM)

    def check_members(self) -> int | None:
        """One look at the members: the group's exit code once it is over, else None."""
        gone = [p for p in self.processes if not p.is_alive()]
        if self.signals:
            if len(gone) == len(self.processes):
                return 0 if all(p.exitcode in self.drained_codes for p in gone) else 1
            return None
        if not gone:
            return None
        for p in gone:
            log.error(
                "%s (pid %s) exited with code %s: stopping the group", p.name, p.pid, p.exitcode
            )
        return self.end(1)

    def end(self, code: int) -> int:
        self.terminate()  # the others drain what they have in flight
        deadline = time.monotonic() + self.settings.drain_grace_s + STOP_EXTRA_S
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(5)
        return code
