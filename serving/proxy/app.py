"""`vigil proxy`'s ASGI app: an OpenAI-compatible pass-through to one upstream.

`POST /v1/chat/completions`, `POST /v1/completions` and `GET /v1/models` go to the upstream
with the client's body unchanged; the answer comes back with the upstream's status and its
bytes as they arrive (no parsing, no re-encoding on the request path: each upstream read is
one write to the client). Finished completions are handed to the traffic logger, whose thread
reads the statistics out of the relayed bytes (serving/proxy/exchange.py) and samples them
like the engine's own traffic.

Keys: the request guard checks the client's Vigil key before the body; the upstream gets
`VIGIL_PROXY_UPSTREAM_API_KEY`, never the client's key unless
`VIGIL_PROXY_FORWARD_CLIENT_KEY`, and even then never an operator or admin key. A client that
disconnects closes its upstream connection, so the upstream stops generating. An upstream that
cannot be reached is a 502, one silent past `VIGIL_PROXY_TIMEOUT_S` a 504; one that breaks off
mid-stream breaks the client's stream off too (no clean end), so the client sees the failure.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from starlette.types import Receive, Scope, Send

from serving.proxy.exchange import Exchange
from serving.proxy.upstream import UpstreamError, UpstreamPool
from serving.server.base.server_send import server_send
from serving.traffic.logger import ObservedRequest, TrafficLogger
from vigil.asgi_guard import ANONYMOUS
from vigil.config import Settings

log = logging.getLogger("vigil.proxy")

COMPLETION_PATHS = frozenset({"/v1/chat/completions", "/v1/completions"})
MODELS_PATH = "/v1/models"
# hop-by-hop, or set by this server itself
_DROPPED = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"transfer-encoding",
        b"te",
        b"trailer",
        b"upgrade",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"server",
        b"date",
    }
)
_FORWARDED = (
    b"content-type",
    b"accept",
    b"traceparent",
    b"tracestate",
    b"openai-organization",
    b"openai-project",
    b"x-request-id",
)
_clock = time.perf_counter
HANDOFF_S = 0.1


def _error(status: int, message: str, kind: str) -> tuple[int, bytes]:
    return status, json.dumps(
        {"error": {"message": message, "type": kind, "param": None, "code": None}}
    ).encode()


def _forwardable(scope: Scope) -> bool:
    """Whether the client's key may go upstream: a global or tenant key may, an operator or
    admin key (Vigil's own: gateways, the sidecar's judge and canaries) never leaves Vigil; its
    requests get `VIGIL_PROXY_UPSTREAM_API_KEY` instead. With no keys configured (development),
    the client's key is the upstream's."""
    principal = (scope.get("state") or {}).get("principal")
    return principal is None or principal is ANONYMOUS or not principal.may_label_others


class ProxyApp:
    def __init__(
        self,
        settings: Settings,
        traffic: TrafficLogger,
        pool: UpstreamPool | None = None,
        close_writer: Callable[[], object] | None = None,
    ) -> None:
        if not settings.proxy_upstream_url:
            raise ValueError("the proxy needs an upstream: VIGIL_PROXY_UPSTREAM_URL or --upstream")
        self.settings = settings
        self.traffic = traffic
        self.pool = pool or UpstreamPool(settings.proxy_upstream_url, settings.proxy_timeout_s)
        self.close_writer = close_writer  # the writer this app opened, flushed after the logger
        key = settings.proxy_upstream_api_key
        self.upstream_auth = (b"authorization", f"Bearer {key}".encode()) if key else None
        self._pending: list[ObservedRequest] = []
        self._flush_timer: asyncio.TimerHandle | None = None

    def _hand(self, item: ObservedRequest) -> None:
        """Finished requests go to the logger's thread in batches, every HANDOFF_S: one wake-up
        of that thread per batch rather than per request, whose GIL hand-over would stall the
        streams the event loop is relaying."""
        self._pending.append(item)
        if self._flush_timer is None:
            self._flush_timer = asyncio.get_running_loop().call_later(HANDOFF_S, self._flush)

    def _flush(self) -> None:
        self._flush_timer = None
        pending, self._pending = self._pending, []
        for item in pending:
            self.traffic.log(item)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            return await self._lifespan(receive, send)
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if path in COMPLETION_PATHS and method == "POST":
            return await self._relay(scope, receive, send, logged=True)
        if path == MODELS_PATH and method == "GET":
            return await self._relay(scope, receive, send, logged=False)
        if path == "/health" and method == "GET":
            return await _answer(send, 200, b'{"status":"ok"}')
        status, body = _error(
            404 if path not in COMPLETION_PATHS | {MODELS_PATH} else 405,
            f"{method} {path} is not proxied",
            "invalid_request_error",
        )
        await _answer(send, status, body)

    def _headers(self, scope: Scope) -> list[tuple[bytes, bytes]]:
        headers = [(k, v) for k, v in scope["headers"] if k in _FORWARDED]
        if self.settings.proxy_forward_client_key and _forwardable(scope):
            headers += [(k, v) for k, v in scope["headers"] if k == b"authorization"]
        elif self.upstream_auth is not None:
            headers.append(self.upstream_auth)
        headers.append(
            (b"accept-encoding", b"identity")
        )  # relayed bytes stay readable for the logger
        return headers

    async def _relay(self, scope: Scope, receive: Receive, send: Send, logged: bool) -> None:
        started = _clock()
        body = await _read_body(receive)
        query = scope.get("query_string") or b""
        target = scope["raw_path"] if scope.get("raw_path") else scope["path"].encode()
        if query:
            target += b"?" + query
        watch = _Watch(asyncio.current_task())
        watcher = asyncio.ensure_future(watch.run(receive))
        upstream = None
        try:
            try:
                upstream = await self.pool.request(
                    scope["method"].encode(), target, self._headers(scope), body
                )
            except UpstreamError as exc:
                status, payload = _error(
                    504 if exc.timeout else 502, f"upstream: {exc}", "upstream_error"
                )
                return await _answer(send, status, payload)
            headers = [(k, v) for k, v in upstream.headers if k not in _DROPPED]
            await send(
                {"type": "http.response.start", "status": upstream.status, "headers": headers}
            )
            write = server_send(scope) or send
            streamed = (upstream.header(b"content-type") or b"").startswith(b"text/event-stream")
            exchange = (
                Exchange(scope, body, started, streamed)
                if logged and upstream.status == 200
                else None
            )
            async for piece in upstream.pieces():
                await write({"type": "http.response.body", "body": piece, "more_body": True})
                if exchange is not None:
                    exchange.keep(piece, _clock())
            watch.finishing = True  # the server reports a finished response as a disconnect
            await write({"type": "http.response.body", "body": b"", "more_body": False})
            if exchange is not None:
                exchange.end_time = time.time()
                self._hand(
                    ObservedRequest(lambda: exchange.observe(self.settings), exchange.end_time)
                )
        except asyncio.CancelledError:
            if not watch.left or watch.task is None:
                raise
            watch.task.uncancel()  # the client left: its upstream connection closes below
        except UpstreamError as exc:
            log.warning("upstream broke off %s: %s", scope["path"], exc)
            raise  # the response started: the server ends the connection without a clean end
        finally:
            watcher.cancel()
            if upstream is not None:
                upstream.release()  # to the pool when the answer ended, else closed

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.pool.close()
                self._flush()
                await asyncio.to_thread(self.traffic.close)
                if self.close_writer is not None:
                    await asyncio.to_thread(self.close_writer)
                await send({"type": "lifespan.shutdown.complete"})
                return


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class _Watch:
    """Waits for the client to disconnect while its answer is relayed, and then cancels the
    relay (uvicorn drops writes to a closed connection silently; only `receive` tells)."""

    def __init__(self, task: asyncio.Task[Any] | None) -> None:
        self.task = task
        self.finishing = False
        self.left = False

    async def run(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                if not self.finishing and self.task is not None:
                    self.left = True
                    self.task.cancel()
                return


async def _answer(send: Send, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
