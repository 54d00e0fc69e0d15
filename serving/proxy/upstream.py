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
import ssl
from collections import deque
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from serving.proxy.connection import (
    MAX_BUFFERED,
    MAX_HEAD_BYTES,
    UpstreamConnection,
    UpstreamError,
)

__all__ = ["MAX_BUFFERED", "MAX_HEAD_BYTES", "UpstreamError", "UpstreamPool", "UpstreamResponse"]


class UpstreamResponse:
    def __init__(self, conn: UpstreamConnection, timeout: float) -> None:
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
        self._idle: deque[UpstreamConnection] = deque()

    def give_back(self, conn: UpstreamConnection) -> None:
        if len(self._idle) < self.max_idle:
            conn.reset()
            self._idle.append(conn)
        else:
            conn.closed = True
            conn.open_transport.close()

    async def _connect(self) -> UpstreamConnection:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(
                    lambda: UpstreamConnection(self), self.host, self.port, ssl=self.ssl
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

    def _take_idle(self) -> UpstreamConnection | None:
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
