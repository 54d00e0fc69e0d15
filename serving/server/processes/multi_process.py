"""`vigil serve --api-server-count N` with N > 1: N API server processes on one port, all clients
of one engine core, under this parent process.

The parent binds one listening socket per API process on the port (SO_REUSEPORT: the kernel
spreads new connections over them by address hash; one shared socket handed long runs of them to
whichever process woke first: 29/29/4/2 of a burst of 64 over four processes), starts the engine
core (`CoreHost`: launch, watch, restart, tell the API processes), then N API processes
(spawned, api_process.py) that each serve their own socket. The parent serves no request.

- An API process that dies: the group ends (the others drain) and the parent exits 1, for the
  service manager to restart it.
- SIGTERM/SIGINT: forwarded to every API process (a second one too: they stop at once); each
  drains as a single server does; once all have exited the core is shut down; exit 0.
- /metrics adds up the processes through prometheus_client's multiprocess mode (a fresh
  directory, set in PROMETHEUS_MULTIPROC_DIR here, before any child imports the library).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
import time
from typing import TYPE_CHECKING

from serving.server.processes.api_server_count import resolve_api_server_count
from serving.server.processes.process_group import POLL_S, ProcessGroup
from vigil.config import Settings

if TYPE_CHECKING:
    from serving.engine.frontend.core_host import CoreHost

log = logging.getLogger("vigil.serve")


def bind_listener(host: str, port: int, reuse_port: bool = False) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def bind_listeners(host: str, port: int, count: int) -> list[socket.socket]:
    """One listening socket per API process on one port. The port must be free first: a plain
    bind would otherwise join a group left by another Vigil still draining there, and split its
    connections with it."""
    if not hasattr(socket, "SO_REUSEPORT"):  # one shared socket, as before
        return [bind_listener(host, port)] * count
    bind_listener(host, port).close()  # "address in use" here, as a single server would say
    return [bind_listener(host, port, reuse_port=True) for _ in range(count)]


class ApiGroup(ProcessGroup):
    """The N API processes around one engine core."""

    what = "API processes"

    def __init__(
        self,
        settings: Settings,
        host: CoreHost,
        socks: list[socket.socket],
        workdir: str,
        metrics_dir: str,
    ):
        from serving.engine.frontend.attached_client import CoreAttachment
        from serving.server.processes.api_process import ApiProcessSpec, run_api_process

        super().__init__(settings)
        self.host = host
        ctx = multiprocessing.get_context("spawn")
        for i in range(len(socks)):  # one listening socket per API process
            attachment = CoreAttachment(
                i, host.input_addresses[i], host.output_addresses[i], host.events_address
            )
            spec = ApiProcessSpec(settings, attachment, os.getpid(), metrics_dir)
            self.processes.append(
                ctx.Process(
                    target=run_api_process,
                    args=(spec, socks[i]),
                    daemon=True,
                    name=f"vigil-api-server-{i}",
                )
            )

    def start(self) -> None:
        for process in self.processes:
            process.start()
        log.info(
            "%d API server processes (pids %s) on %s:%d, engine core pid %s",
            len(self.processes),
            ", ".join(str(p.pid) for p in self.processes),
            self.settings.host,
            self.settings.port,
            self.host.core_pid,
        )

    def supervise(self) -> int:
        """Run until the group is over; the exit code."""
        first = self.host.core
        if first is None:
            raise RuntimeError("supervise() before the engine core was spawned")
        watching = False
        while True:
            if not watching and first.ready.is_set():
                self.host.start_watching()  # from now on a dead core is restarted
                watching = True
            elif not watching and not first.process.is_alive():
                log.error(
                    "the engine core exited with code %s before it was ready",
                    first.process.exitcode,
                )
                return self.end(1)
            if (code := self.check_members()) is not None:
                return code
            time.sleep(POLL_S)


WORKDIR_PREFIX = "vigil-api-"
OWNER_FILE = "owner.pid"


def remove_stale_workdirs(parent: str | None = None) -> list[str]:
    """Delete this user's work directories of parents that are gone (killed before their own
    cleanup ran: their sockets and metric files would pile up in the temp directory). A
    directory without an owner file, of another user, or of a live process is kept."""
    parent = parent or tempfile.gettempdir()
    removed = []
    for name in os.listdir(parent):
        path = os.path.join(parent, name)
        if (
            not name.startswith(WORKDIR_PREFIX)
            or not os.path.isdir(path)
            or os.stat(path).st_uid != os.getuid()
        ):
            continue
        try:
            with open(os.path.join(path, OWNER_FILE)) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            continue
        if not _alive(pid):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process holds the pid now
        return True
    return True


def run_multi_process(settings: Settings) -> int:
    """Serve with `settings.api_server_count` API processes until drained; the exit code."""
    from serving.engine import EngineConfig
    from serving.engine.frontend.core_host import CoreHost

    for path in remove_stale_workdirs():
        log.info("removed %s, left by an API parent that is gone", path)
    workdir = tempfile.mkdtemp(prefix=WORKDIR_PREFIX)
    with open(os.path.join(workdir, OWNER_FILE), "w") as f:
        f.write(str(os.getpid()))
    metrics_dir = os.path.join(workdir, "metrics")
    os.mkdir(metrics_dir)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir  # inherited by every spawned child
    n = resolve_api_server_count(settings)  # a number by now (serve_command resolved it)
    host = CoreHost(
        EngineConfig.from_settings(settings),
        [f"ipc://{workdir}/input-{i}" for i in range(n)],
        [f"ipc://{workdir}/output-{i}" for i in range(n)],
        workdir,
    )
    socks = bind_listeners(settings.host, settings.port, n)
    group = ApiGroup(settings, host, socks, workdir, metrics_dir)
    previous = {sig: signal.signal(sig, group.on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        host.spawn()
        group.start()
        code = group.supervise()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        group.end(0)  # nothing left by now, unless supervise raised
        for sock in socks:
            sock.close()
        host.shutdown()
        shutil.rmtree(workdir, ignore_errors=True)
    log.info("all API server processes exited; engine core stopped")
    return code
