"""A pooled HTTP/1.1 client for the proxy's upstream, on asyncio and httptools (the parser
uvicorn runs), built for relaying streams.

Body bytes are handed on per socket read, not per HTTP chunk, so a proxy that falls behind
gets larger pieces instead of a queue (SSE bytes unchanged, only the framing differs). Past
`MAX_BUFFERED` unread bytes the socket is not read: a slow client slows its stream alone.
An answer whose status line and headers run past `MAX_HEAD_BYTES` is refused (502), so a
hostile upstream cannot grow the header list without end. Keep-alive connections are kept per
origin (`max_idle` of them); a request that finds its pooled connection closed before any
answer is sent once more on a new one. Closing an `UpstreamResponse` before its end closes its
connection: the upstream sees the client leave.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections import deque
from collections.abc import AsyncIterator
from typing import cast
from urllib.parse import urlsplit

import httptools

MAX_BUFFERED = 256 * 1024
MAX_HEAD_BYTES = 64 * 1024  # status line and headers; past it the answer is refused (502)


class UpstreamError(Exception):
    """The upstream could not be reached, broke off, or went silent for the timeout."""

    def __init__(self, message: str, timeout: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout


class _Connection(asyncio.Protocol):
    def __init__(self, pool: UpstreamPool) -> None:
        self.pool = pool
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.reset()

    def reset(self) -> None:
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.pieces: list[bytes] = []
        self.buffered = 0
        self.head_bytes = 0
        self.head_done = False
        self.complete = False
        self.keep_alive = False  # llhttp answers this inside its callbacks only
        self.received_any = False
        self.error: str | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.paused = False
        self.timeout = 0.0
        self.last = 0.0
        timer: asyncio.TimerHandle | None = getattr(self, "timer", None)
        if timer is not None:
            timer.cancel()
        self.timer: asyncio.TimerHandle | None = None

    @property
    def open_transport(self) -> asyncio.Transport:
        """The transport: asyncio calls connection_made before the pool sees the connection."""
        transport = self.transport
        assert transport is not None
        return transport

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream connection: its transport reads and writes, whichever loop made it
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # each relayed piece is sent as soon as it is written (asyncio sets this too)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.received_any = True
        if self.timer is not None:
            self.last = self.loop.time()
        if not self.head_done:
            self.head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.error = f"the upstream's answer is not valid HTTP ({exc})"
            self.open_transport.close()
        if not self.head_done and self.head_bytes > MAX_HEAD_BYTES and self.error is None:
            self.error = f"the upstream's headers ran past {MAX_HEAD_BYTES} bytes"
            self.open_transport.close()
        self._wake()
        if self.buffered > MAX_BUFFERED and not self.paused and not self.complete:
            self.paused = True
            self.open_transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if not self.complete and self.error is None:
            self.error = "the upstream closed the connection before the answer ended"
        self._wake()

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.head_done = True

    def on_body(self, body: bytes) -> None:
        self.pieces.append(body)
        self.buffered += len(body)

    def on_message_complete(self) -> None:
        self.complete = True
        self.keep_alive = self.parser.should_keep_alive()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, timeout: float) -> None:
        """Until the next bytes or the end; UpstreamError after `timeout` s of silence. One
        timer per connection, re-armed lazily, rather than one per wait."""
        loop = self.loop
        self.timeout = timeout
        if self.timer is None:
            self.last = loop.time()
            self.timer = loop.call_later(timeout, self._check_silence)
        self.waiter = loop.create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None

    def _check_silence(self) -> None:
        self.timer = None
        if self.waiter is None or self.waiter.done():
            return
        loop = self.loop
        quiet = loop.time() - self.last
        if quiet >= self.timeout:
            self.waiter.set_exception(
                UpstreamError(f"the upstream sent nothing for {self.timeout:g} s", timeout=True)
            )
        else:
            self.timer = loop.call_later(self.timeout - quiet, self._check_silence)

    def take(self) -> bytes:
        pieces, self.pieces, self.buffered = self.pieces, [], 0
        if self.paused:
            self.paused = False
            self.open_transport.resume_reading()
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)


class UpstreamResponse:
    def __init__(self, conn: _Connection, timeout: float) -> None:
        self._conn = conn
        self._timeout = timeout
        self.status = conn.status
        self.headers = conn.headers
        self._done = False
        self._released = False
        self._pooled = False

    def header(self, name: bytes) -> bytes | None:
        return next((v for k, v in self.headers if k == name), None)

    async def pieces(self) -> AsyncIterator[bytes]:
        """The body as it arrives (UpstreamError if it breaks off)."""
        conn = self._conn
        while True:
            if conn.pieces:
                yield conn.take()
                continue
            if conn.complete:
                break
            if conn.error is not None:
                self.close()
                raise UpstreamError(conn.error)
            await conn.wait(self._timeout)
        self._done = True
        self.release()

    async def read(self) -> bytes:
        return b"".join([piece async for piece in self.pieces()])

    def release(self) -> None:
        """Back to the pool when the answer ended and the upstream keeps the connection, else
        closed. Only the first call counts: once pooled, the connection may already carry
        another request."""
        if self._released:
            return
        self._released = True
        conn = self._conn
        if self._done and conn.complete and not conn.closed and conn.keep_alive:
            self._pooled = True
            conn.pool.give_back(conn)
        else:
            self.close()

    def close(self) -> None:
        """Close the connection, unless it already went back to the pool."""
        if self._released and self._pooled:
            return
        self._released = True
        conn = self._conn
        if not conn.closed and conn.transport is not None:
            conn.closed = True
            conn.transport.close()


class UpstreamPool:
    """Connections to one origin (`http://host:port` or https)."""

    def __init__(self, base_url: str, timeout_s: float, max_idle: int = 256) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the upstream must be an http:// or https:// URL, got {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl = ssl.create_default_context() if parts.scheme == "https" else None
        default_port = self.port == (443 if parts.scheme == "https" else 80)
        self.host_header = (self.host if default_port else f"{self.host}:{self.port}").encode()
        self.base_path = parts.path.rstrip("/").removesuffix("/v1")
        self.timeout_s = timeout_s
        self.max_idle = max_idle
        self._idle: deque[_Connection] = deque()

    def give_back(self, conn: _Connection) -> None:
        if len(self._idle) < self.max_idle:
            conn.reset()
            self._idle.append(conn)
        else:
            conn.closed = True
            conn.open_transport.close()

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _Connection(self), self.host, self.port, ssl=self.ssl
                ),
                self.timeout_s,
            )
        except TimeoutError:
            raise UpstreamError(
                f"no connection to {self.host}:{self.port} within {self.timeout_s:g} s",
                timeout=True,
            ) from None
        except OSError as exc:
            raise UpstreamError(
                f"cannot connect to {self.host}:{self.port} ({exc.strerror or exc})"
            ) from None
        return conn

    def _take_idle(self) -> _Connection | None:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        return None

    async def request(
        self, method: bytes, path: bytes, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> UpstreamResponse:
        head = [
            method,
            b" ",
            self.base_path.encode() + path,
            b" HTTP/1.1\r\nhost: ",
            self.host_header,
            b"\r\ncontent-length: ",
            str(len(body)).encode(),
            b"\r\n",
        ]
        for name, value in headers:
            head += [name, b": ", value, b"\r\n"]
        head.append(b"\r\n")
        message = b"".join(head) + body
        for attempt in range(2):
            conn = self._take_idle() if attempt == 0 else None
            reused = conn is not None
            if conn is None:
                conn = await self._connect()
            conn.open_transport.write(message)
            try:
                while not conn.head_done and conn.error is None:
                    await conn.wait(self.timeout_s)
            except BaseException:  # cancelled (the client left) or silent: the upstream must see it
                conn.closed = True
                conn.open_transport.close()
                raise
            if conn.head_done:
                return UpstreamResponse(conn, self.timeout_s)
            conn.closed = True
            conn.open_transport.close()
            if not (reused and not conn.received_any):  # a stale keep-alive connection: once more
                raise UpstreamError(conn.error or "the upstream did not answer")
        raise UpstreamError("the upstream did not answer")

    def close(self) -> None:
        while self._idle:
            conn = self._idle.pop()
            conn.closed = True
            if conn.transport is not None:
                conn.transport.close()
