"""The proxy's ASGI app (key check and body limit before it, the traffic logger and storage's
writer behind it) and its uvicorn configuration: what `vigil proxy` serves, in one process or in
each of several workers (serving/proxy/workers.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import uvicorn
from starlette.types import ASGIApp

from serving.proxy.app import ProxyApp
from serving.server.base.errors import openai_error_json
from serving.server.base.server_send import ServerSend
from serving.traffic.logger import TrafficLogger
from serving.traffic.sampler import TrafficSampler
from vigil.asgi_guard import RequestGuard
from vigil.auth_throttle import throttle_from_settings
from vigil.config import Settings
from vigil.http_server import uvicorn_config
from vigil.keys import KeyRing


def build_proxy(
    settings: Settings,
    *,
    writer: Any | None = None,
    log_traffic: bool | None = None,
    sampler_seed: int | None = None,
    worker: str | None = None,
) -> Any:
    """The ASGI app; `writer`: a SampleWriter to use (the caller closes it), else one is opened
    from settings when traffic is sampled; `worker`: "<index>:<pid>" of one of several proxy
    processes, sent back on every response as `x-vigil-api-server`."""
    if log_traffic is None:
        log_traffic = (
            writer is not None or settings.sample_rate > 0 or settings.segment_min_per_hour > 0
        )
    close_writer: Callable[[], object] | None = None
    if writer is None and log_traffic:
        from storage.writer import SampleWriter

        writer = SampleWriter.from_settings(settings)
        close_writer = writer.close
    sampler = TrafficSampler(settings.sample_rate, settings.segment_min_per_hour, seed=sampler_seed)
    traffic = TrafficLogger(sampler, writer if log_traffic else None, model_version=None)
    proxy = ProxyApp(settings, traffic, close_writer=close_writer)
    guarded: ASGIApp = RequestGuard(
        proxy,
        keyring=KeyRing.from_settings(settings),
        protected=("/v1/",),
        max_bytes=settings.max_request_bytes,
        body_timeout_s=settings.body_timeout_s,
        render=openai_error_json,
        throttle=throttle_from_settings(settings),
        trusted_proxies=tuple(settings.trusted_proxies),
    )
    if worker is not None:
        from serving.server.processes.api_process import ServerPidHeader

        guarded = ServerPidHeader(guarded, value=worker)
    app = ServerSend(guarded)  # body chunks skip the guard's send wrapper (and the header's)
    app.proxy = proxy  # type: ignore[attr-defined]  # the proxy behind the app, for tests to read
    return app


def proxy_config(settings: Settings, app: Any) -> uvicorn.Config:
    return uvicorn_config(
        app,
        settings,
        sidecar=False,
        host=settings.host,
        port=settings.port,
        lifespan="on",
        log_level="info",
        access_log=False,
        loop="uvloop",
        timeout_keep_alive=5,
        timeout_graceful_shutdown=max(5, int(settings.drain_grace_s)),
    )
