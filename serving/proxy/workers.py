"""`vigil proxy --workers N` with N > 1: N proxy processes on one port.

One event loop relays every byte of its streams and parses every new request; when a batch of
requests arrives at once (a closed-loop client, an engine finishing a batch), the last one's
first token waits behind the others' set-up on that one loop. N processes take such a burst N
at a time, each with its own interpreter lock, so the traffic logger's and storage writer's
threads of one do not hold up the streams of another.

The parent binds one listening socket per worker on the port (SO_REUSEPORT, as `vigil serve
--api-server-count` does: the kernel spreads new connections over them by address hash) and
spawns the workers, each a whole proxy: its own upstream pool, traffic logger and storage
writer (the writers share the journal directory, which is built for that). The parent serves
no request.

- A worker that dies: the others drain and the parent exits 1, for the service manager.
- SIGTERM/SIGINT: forwarded to every worker; each drains (uvicorn's graceful shutdown, then
  its logger and writer flush; a second signal stops them at once); exit 0 once all have
  exited cleanly.
- A worker whose parent is gone (killed) drains and exits by itself.

Sampling is decided per worker: the sample rate holds overall, the per-segment hourly minimum
(`VIGIL_SEGMENT_MIN_PER_HOUR`) in each worker.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from typing import Any

import uvicorn

from serving.heap import freeze_startup_heap
from serving.proxy.build import build_proxy, proxy_config
from serving.server.processes.process_group import POLL_S, ProcessGroup
from vigil.config import Settings

log = logging.getLogger("vigil.proxy")

MAX_AUTO_WORKERS = 8


def worker_count(settings: Settings) -> int:
    """`proxy_workers`, or when 0 one worker per four CPUs this process may run on (1 to 8):
    the rest stay with the upstream engine and the clients on the same machine."""
    if settings.proxy_workers > 0:
        return settings.proxy_workers
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(MAX_AUTO_WORKERS, cpus // 4))


def run_worker(settings: Settings, sock: socket.socket, parent_pid: int, index: int) -> None:
    """A worker process's entry point: serve `sock` until told to stop, then drain."""
    os.setpgrp()  # a terminal's Ctrl-C reaches the parent alone, which forwards one SIGTERM
    logging.basicConfig(
        level=logging.INFO,
        format=f"%(asctime)s %(levelname)s %(name)s[proxy-{index}]: %(message)s",
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)
    app = build_proxy(settings, worker=f"{index}:{os.getpid()}")
    freeze_startup_heap()
    server = uvicorn.Server(proxy_config(settings, app))
    threading.Thread(
        target=_watch_parent, args=(parent_pid, server), daemon=True, name="vigil-parent-watch"
    ).start()
    server.run(sockets=[sock])


def _watch_parent(parent_pid: int, server: Any) -> None:
    while os.getppid() == parent_pid:
        time.sleep(1.0)
    log.error("the parent process is gone: draining")
    server.should_exit = True


class WorkerGroup(ProcessGroup):
    what = "workers"
    # how a worker ends once drained: uvicorn raises the signal it caught again after shutdown
    drained_codes = frozenset({0, -signal.SIGTERM, -signal.SIGINT})

    def __init__(self, settings: Settings, socks: list[socket.socket]) -> None:
        super().__init__(settings)
        ctx = multiprocessing.get_context("spawn")
        self.processes = [
            ctx.Process(
                target=run_worker,
                args=(settings, sock, os.getpid(), i),
                daemon=True,
                name=f"vigil-proxy-{i}",
            )
            for i, sock in enumerate(socks)
        ]

    def supervise(self) -> int:
        """Run until the group is over; the exit code."""
        while (code := self.check_members()) is None:
            time.sleep(POLL_S)
        return code


def run_workers(settings: Settings, count: int) -> int:
    """Serve with `count` proxy processes on settings.host:port until they have drained."""
    from serving.server.processes.multi_process import bind_listeners

    socks = bind_listeners(settings.host, settings.port, count)
    group = WorkerGroup(settings, socks)
    previous = {sig: signal.signal(sig, group.on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for process in group.processes:
            process.start()
        log.info(
            "%d proxy processes (pids %s) on %s:%d",
            count,
            ", ".join(str(p.pid) for p in group.processes),
            settings.host,
            settings.port,
        )
        code = group.supervise()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        group.end(0)  # nothing left by now, unless supervise raised
        for sock in socks:
            sock.close()
    log.info("all proxy processes exited")
    return code
