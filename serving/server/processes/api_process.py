"""One of several API server processes (`VIGIL_API_SERVER_COUNT` > 1), started by the parent in
serving/server/processes/multi_process.py.

It serves the listening socket the parent bound for it (uvicorn `Server.run(sockets=[sock])`; the
sockets of all API processes share the port through SO_REUSEPORT, and the kernel spreads new
connections over them), is a
client of the parent's engine core (`AttachedCoreClient`), and drains on SIGTERM as a single
`vigil serve` does. It runs in its own process group, so a terminal's Ctrl-C reaches the parent
only, which forwards one SIGTERM; if the parent disappears, it drains and exits by itself.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vigil.config import Settings

if TYPE_CHECKING:
    from serving.engine.frontend.attached_client import CoreAttachment
    from serving.engine.frontend.client import EngineClient
    from serving.server.processes.draining_server import DrainingServer

log = logging.getLogger("vigil.serve")

PID_HEADER = b"x-vigil-api-server"  # "<index>:<pid>" on every response: which process answered
PARENT_POLL_S = 1.0


@dataclass
class ApiProcessSpec:
    settings: Settings
    attachment: CoreAttachment
    parent_pid: int
    multiprocess_dir: str


class ServerPidHeader:
    """Pure ASGI (a BaseHTTPMiddleware would buffer streams): adds PID_HEADER to responses."""

    def __init__(self, app: ASGIApp, value: str):
        self.app, self.value = app, value.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {
                    **message,
                    "headers": [*message.get("headers", []), (PID_HEADER, self.value)],
                }
            await send(message)

        await self.app(scope, receive, send_with_header)


def run_api_process(spec: ApiProcessSpec, sock: socket.socket) -> None:
    """Process entry point; exits 0 once drained, 1 if the engine never became ready."""
    os.setpgrp()
    logging.basicConfig(
        level=logging.INFO,
        format=f"%(asctime)s %(levelname)s %(name)s[api-{spec.attachment.index}]: %(message)s",
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)
    from serving.server.base.state import Phase
    from serving.server.processes.draining_server import build_server
    from serving.server.service.app import create_app

    def load_attached(settings: Settings) -> EngineClient:
        from serving.engine import EngineConfig
        from serving.engine.frontend.attached_client import AttachedCoreClient

        engine = AttachedCoreClient(EngineConfig.from_settings(settings), spec.attachment)
        engine.start()
        return engine

    app = create_app(
        spec.settings, engine_loader=load_attached, multiprocess_metrics=spec.multiprocess_dir
    )
    app.add_middleware(ServerPidHeader, value=f"{spec.attachment.index}:{os.getpid()}")
    server = build_server(spec.settings, app)
    threading.Thread(
        target=_watch_parent, args=(spec.parent_pid, server), daemon=True, name="vigil-parent-watch"
    ).start()
    server.run(sockets=[sock])
    sys.exit(1 if app.state.vigil.phase is Phase.FAILED else 0)


def _watch_parent(parent_pid: int, server: DrainingServer) -> None:
    """The parent was killed: nobody forwards signals or supervises the core any more; drain."""
    stop = threading.Event()
    while not stop.wait(PARENT_POLL_S):
        if os.getppid() != parent_pid:
            log.error("the parent process is gone: draining")
            server.begin_drain()
            return
