"""One connection of the proxy's upstream pool (upstream.py): an asyncio protocol whose bytes
httptools parses as they arrive. Body bytes are kept per socket read; past `MAX_BUFFERED` unread
bytes the socket is not read, and an answer whose head runs past `MAX_HEAD_BYTES` is refused.
"""

from __future__ import annotations

import asyncio
import socket
from typing import TYPE_CHECKING, cast

import httptools

if TYPE_CHECKING:  # the pool makes its connections; its type is read for the checker only
    from serving.proxy.upstream import UpstreamPool

MAX_BUFFERED = 256 * 1024
MAX_HEAD_BYTES = 64 * 1024  # status line and headers; past it the answer is refused (502)


class UpstreamError(Exception):
    """The upstream could not be reached, broke off, or went silent for the timeout."""

    def __init__(self, message: str, timeout: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout


class UpstreamConnection(asyncio.Protocol):
    """One keep-alive connection to the upstream: httptools parses its answers as they arrive."""

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
