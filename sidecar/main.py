"""`vigil sidecar`: the FastAPI app, the persistent job scheduler, leader election and the
webhook delivery worker in one process.

    sidecar = Sidecar(settings)      # builds everything, touches nothing yet
    sidecar.start()                  # migrate, start the (paused) scheduler and the election
    uvicorn.Server(...).run()        # serves sidecar.app until SIGINT/SIGTERM
    sidecar.stop()                   # hand the lease over, stop jobs and deliveries

Every replica serves the API; only the elected leader runs jobs and sends webhooks.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from datetime import UTC, datetime
from types import FrameType
from typing import TYPE_CHECKING, Any

import uvicorn
from fastapi import FastAPI

from sidecar.app import create_app
from sidecar.leader import LeaderElector
from sidecar.scheduler import (
    Runtime,
    build_scheduler,
    ensure_jobs,
    register_runtime,
    scheduled_jobs,
)
from sidecar.watchdog import Watchdog
from vigil.config import Settings, get_settings, load_settings
from vigil.http_server import uvicorn_config

if TYPE_CHECKING:
    from alerts.worker import DeliveryWorker

log = logging.getLogger("vigil.sidecar")


class Sidecar:
    def __init__(self, settings: Settings, *, migrate: bool = True) -> None:
        from storage.db import get_engine, session_factory

        self.settings = settings
        self.migrate = migrate
        self.engine = get_engine(settings.database_url)
        self.session_factory = session_factory(self.engine)
        self.scheduler = build_scheduler(self.engine)
        self.elector = LeaderElector(
            self.session_factory,
            lease_s=settings.leader_lease_s,
            on_elected=self._elected,
            on_demoted=self._demoted,
        )
        self.delivery: DeliveryWorker | None = None
        self.watchdog: Watchdog | None = None
        self._lock = threading.Lock()
        self.started_at: datetime | None = None
        self.app: FastAPI = create_app(settings, self.session_factory, status=self.status)

    @property
    def holder(self) -> str:
        return self.elector.holder

    def start(self) -> None:
        if self.settings.torch_threads:  # embedding and MMD share the box with the engine
            import torch

            torch.set_num_threads(self.settings.torch_threads)
        if self.migrate:
            from storage.migrate import upgrade

            upgrade(self.settings.database_url)
        # import the heavy job dependencies now, before the election: loading torch's and
        # Evidently's extension modules holds the GIL for seconds, which would starve the lease
        # renewal thread mid-job and make leadership flap between replicas
        import dashboards.report.evidently_part as evidently_part
        import sidecar.jobs.drift  # noqa: F401 - loads drift, torch and pandas; no name used

        evidently_part.preload()
        register_runtime(
            Runtime(
                self.settings, self.session_factory, self.holder, lambda: self.elector.is_leader
            )
        )
        self.scheduler.start(paused=True)
        self.started_at = datetime.now(UTC)
        self.elector.start()
        self.watchdog = Watchdog(  # leader lost / jobs stalled -> monitoring alerts
            self.settings,
            self.session_factory,
            is_leader=lambda: self.elector.is_leader,
            lost_at=lambda: self.elector.lost_at,
            scheduled=lambda: scheduled_jobs(self.scheduler, self.settings),
        ).start()
        log.info("sidecar %s started; waiting for the scheduler lease", self.holder)

    def stop(self) -> None:
        if self.watchdog is not None:
            self.watchdog.stop()
        self.elector.stop()  # demotes (pausing jobs, stopping deliveries) and releases the lease
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)
        register_runtime(None)

    def _elected(self) -> None:
        with self._lock:
            ensure_jobs(self.scheduler, self.settings, run_now=True)
            self.scheduler.resume()
            from alerts.worker import DeliveryWorker

            self.delivery = DeliveryWorker(self.session_factory, settings=self.settings).start()

    def _demoted(self) -> None:
        with self._lock:
            if self.scheduler.running:
                self.scheduler.pause()
            if self.delivery is not None:
                self.delivery.stop()
                self.delivery = None

    def wake_delivery(self) -> None:
        if self.delivery is not None:
            self.delivery.wake()

    def status(self) -> dict[str, Any]:
        jobs = {}
        if self.elector.is_leader and self.scheduler.running:
            for job in self.scheduler.get_jobs():
                nxt = job.next_run_time
                jobs[job.id] = nxt.astimezone(UTC).isoformat() if nxt else None
        # public (/health): the holder id names the host and the pid, so it stays in the log
        return {
            "leader": self.elector.is_leader,
            "next_runs": jobs,
            "delivery_worker": bool(self.delivery and self.delivery.running),
        }


def server_config(settings: Settings, app: FastAPI) -> uvicorn.Config:
    """uvicorn's config for the sidecar: its address, the header deadline, the connection caps
    and no proxy headers (vigil.http_server.uvicorn_config)."""
    return uvicorn_config(
        app, settings, sidecar=True, host=settings.sidecar_host, port=settings.sidecar_port,
        log_level="info",
    )  # fmt: skip


def sidecar_command(args: argparse.Namespace) -> int:
    """`vigil sidecar [--host H] [--port P]`: serve until SIGINT/SIGTERM."""
    overrides: dict[str, Any] = {}
    if getattr(args, "host", None):
        overrides["sidecar_host"] = args.host
    if getattr(args, "port", None):
        overrides["sidecar_port"] = args.port
    settings = load_settings(**overrides) if overrides else get_settings()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    sidecar = Sidecar(settings)
    server = uvicorn.Server(server_config(settings, sidecar.app))

    # uvicorn re-raises a caught SIGTERM/SIGINT through the handlers it found at start; with
    # these, that ends serve() normally, so the lease is handed over and jobs stop cleanly
    # (and a signal during start-up still stops the server once it is up)
    def _stop(signum: int, _frame: FrameType | None) -> None:
        server.should_exit = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    sidecar.start()
    try:
        server.run()
    finally:
        sidecar.stop()
    log.info("sidecar %s stopped", sidecar.holder)
    return 0
