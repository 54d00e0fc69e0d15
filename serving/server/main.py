"""`vigil serve`: uvicorn run programmatically so that SIGTERM drains instead of killing.

First SIGTERM/SIGINT: /health goes 503, new requests get 503, in-flight requests get
`drain_grace_s` to finish, sampled traffic is flushed to storage, then the process exits 0.
A second signal forces an immediate exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import Iterator

import uvicorn
from fastapi import FastAPI

from serving.server.api_server_count import resolve_api_server_count
from serving.server.app import create_app
from serving.server.state import Phase
from vigil.config import Settings, load_settings
from vigil.http_server import protocol_for

log = logging.getLogger("vigil.serve")


class DrainingServer(uvicorn.Server):
    """uvicorn.Server whose signal handling starts the app's drain instead of closing sockets."""

    def __init__(self, config: uvicorn.Config, app: FastAPI):
        super().__init__(config)
        self.vigil_app = app
        self._loop: asyncio.AbstractEventLoop | None = None
        self._signalled = False
        app.state.vigil.request_exit = self._request_exit

    def _request_exit(self) -> None:
        self.should_exit = True

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        self._loop = asyncio.get_running_loop()
        if threading.current_thread() is not threading.main_thread():
            yield  # signals only reach the main thread; callers elsewhere use begin_drain()
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        original = {sig: signal.signal(sig, self._on_signal) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    def _on_signal(self, sig: int, frame) -> None:
        if self._signalled:  # a second signal: stop now
            log.warning("second signal: exiting without waiting")
            self.should_exit = self.force_exit = True
            return
        self._signalled = True
        log.info("signal %s: draining", signal.Signals(sig).name)
        self.begin_drain()

    def begin_drain(self) -> None:
        """Start the graceful drain from any thread."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.vigil_app.state.drain.begin)


def build_server(settings: Settings, app: FastAPI | None = None, **app_kwargs) -> DrainingServer:
    app = app or create_app(settings, **app_kwargs)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        lifespan="on",
        log_level="info",
        access_log=False,
        timeout_graceful_shutdown=5,
        timeout_keep_alive=5,
        http=protocol_for(settings, sidecar=False),
    )
    return DrainingServer(config, app)


def run_server(settings: Settings, **app_kwargs) -> int:
    """Serve until drained; 0 on a clean exit, 1 if the model could not be loaded."""
    server = build_server(settings, **app_kwargs)
    server.run()
    state = server.vigil_app.state.vigil
    return 1 if state.phase is Phase.FAILED else 0


def _prepare_storage(settings: Settings) -> None:
    """Apply the migrations so sampled rows have a table (idempotent; journaled if it fails)."""
    try:
        from storage.migrate import upgrade

        upgrade(settings.database_url)
    except Exception as exc:  # the writer journals until the database is usable
        log.error("could not migrate %s: %s", settings.database_url.split("@")[-1], exc)


def serve_command(args) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    overrides = {}
    for name, field in (
        ("host", "host"),
        ("port", "port"),
        ("model", "model_path"),
        ("served_model_name", "model_name"),
        ("tensor_parallel_size", "tensor_parallel_size"),
        ("api_server_count", "api_server_count"),
    ):
        value = getattr(args, name, None)
        if value is not None:
            overrides[field] = value
    settings = load_settings(**overrides)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)
    if settings.sample_rate > 0 or settings.segment_min_per_hour > 0:
        _prepare_storage(settings)
    count = resolve_api_server_count(settings)
    settings = settings.model_copy(update={"api_server_count": count})
    if count > 1:
        log.info("%d API server processes on port %d", count, settings.port)
        from serving.server.multi_process import run_multi_process

        return run_multi_process(settings)
    return run_server(settings)
