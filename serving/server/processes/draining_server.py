"""`DrainingServer`: uvicorn run programmatically so that SIGTERM drains instead of killing, for
a single `vigil serve` (processes/main.py) and for each of several API processes
(processes/api_process.py) alike.

First SIGTERM/SIGINT: the app's drain starts (/health 503, new requests 503, in-flight requests
get `drain_grace_s`); a second signal forces an immediate exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from typing import Any

import uvicorn
from fastapi import FastAPI

from serving.server.service.app import create_app
from vigil.config import Settings
from vigil.http_server import uvicorn_config

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


def build_server(
    settings: Settings, app: FastAPI | None = None, **app_kwargs: Any
) -> DrainingServer:
    app = app or create_app(settings, **app_kwargs)
    config = uvicorn_config(
        app,
        settings,
        sidecar=False,
        host=settings.host,
        port=settings.port,
        lifespan="on",
        log_level="info",
        access_log=False,
        timeout_graceful_shutdown=5,
        timeout_keep_alive=5,
    )
    return DrainingServer(config, app)
