"""Vigil's three servers run for real on a loopback socket, each built by its production config
(`sidecar.main.server_config`, `serving.server.processes.draining_server.build_server`,
`serving.proxy.main.proxy_config`), so what uvicorn does before the app (proxy headers,
connection caps) is what production does."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from sec_fakes import API_KEY, MODEL, FakeEngine

from vigil.config import load_settings


def settings_for(**overrides: Any):
    values = dict(
        api_keys=[API_KEY],
        model_name=MODEL,
        sample_rate=0.0,
        segment_min_per_hour=0,
        database_url="sqlite://",
    )
    return load_settings(**{**values, **overrides})


@contextmanager
def serving(server: uvicorn.Server) -> Iterator[str]:
    """Run `server` on an ephemeral 127.0.0.1 port in a thread; yields its base URL."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "the server did not start"
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


@contextmanager
def sidecar_server(settings, app=None) -> Iterator[str]:
    from sidecar.app import create_app
    from sidecar.main import server_config
    from storage.db import get_engine, session_factory

    if app is None:
        app = create_app(settings, session_factory(get_engine(settings.database_url)))
    with serving(uvicorn.Server(server_config(settings, app))) as url:
        yield url


@contextmanager
def engine_server(settings, writer=None, engine=None) -> Iterator[str]:
    from serving.server.processes.draining_server import build_server
    from serving.server.service.app import create_app

    app = create_app(
        settings,
        engine=engine or FakeEngine(),
        writer=writer,
        log_traffic=writer is not None,
        sampler_seed=0,
    )
    with serving(build_server(settings, app)) as url:
        yield url


@contextmanager
def proxy_server(settings, writer=None) -> Iterator[str]:
    from serving.proxy.main import build_proxy, proxy_config

    app = build_proxy(settings, writer=writer, sampler_seed=0)
    with serving(uvicorn.Server(proxy_config(settings, app))) as url:
        yield url
