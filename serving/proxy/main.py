"""`vigil proxy --upstream URL`: serve the proxy app (serving/proxy/build.py) with uvicorn
(uvloop, httptools), in this process or, with several workers, in that many on one port
(serving/proxy/workers.py)."""

from __future__ import annotations

import argparse
import logging
from typing import Any

import uvicorn

from serving.heap import freeze_startup_heap
from serving.proxy.build import build_proxy, proxy_config
from serving.proxy.workers import run_workers, worker_count
from vigil.config import load_settings

log = logging.getLogger("vigil.proxy")

__all__ = ["build_proxy", "proxy_command", "proxy_config"]


def proxy_command(args: argparse.Namespace) -> int:
    overrides: dict[str, Any] = {}
    for name, field in (
        ("host", "host"),
        ("port", "port"),
        ("upstream", "proxy_upstream_url"),
        ("workers", "proxy_workers"),
    ):
        value = getattr(args, name, None)
        if value is not None:
            overrides[field] = value
    settings = load_settings(**overrides)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)
    if not settings.proxy_upstream_url:
        print("vigil proxy: give the upstream with --upstream URL or VIGIL_PROXY_UPSTREAM_URL")
        return 2
    if settings.sample_rate > 0 or settings.segment_min_per_hour > 0:
        from serving.server.processes.main import _prepare_storage

        _prepare_storage(settings)
    log.info(
        "proxy on http://%s:%d/v1 -> %s", settings.host, settings.port, settings.proxy_upstream_url
    )
    workers = worker_count(settings)
    if workers > 1:
        return run_workers(settings, workers)
    app = build_proxy(settings)
    freeze_startup_heap()
    uvicorn.Server(proxy_config(settings, app)).run()
    return 0
