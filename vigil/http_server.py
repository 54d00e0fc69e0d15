"""Deadlines at the socket, for both services' uvicorn servers: a request's headers must arrive
within `header_timeout_s`, and past `max_connections` open connections a new one is answered 503
and closed.

uvicorn times out idle keep-alive connections and the request guard (`vigil/asgi_guard.py`)
times bodies, but nothing times the request line and headers: a client sending them at a byte
every few seconds, or nothing at all after connecting, holds a connection for as long as it
likes, and enough of them exhaust the process's file descriptors. The header clock starts when
the connection opens and again when the first byte of each later request on it arrives, and
stops when the request's headers are complete; when it runs out, the client gets a 408 and the
connection is closed. The connection cap is checked as each connection opens, before a byte is
read.

    config = uvicorn.Config(
        app, ..., http=deadline_protocol(header_timeout_s=10, max_connections=2048)
    )
"""

from __future__ import annotations

import asyncio
import logging

from uvicorn.protocols.http.auto import AutoHTTPProtocol

log = logging.getLogger("vigil.http")


def _raw_response(status: bytes, message: str) -> bytes:
    body = message.encode()
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body
    )


def deadline_protocol(
    header_timeout_s: float, max_connections: int, base: type[asyncio.Protocol] = AutoHTTPProtocol
) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (httptools, or h11 without it) with a header deadline and a
    connection cap; pass it as `uvicorn.Config(http=...)`."""
    if header_timeout_s <= 0 or max_connections < 1:
        raise ValueError("header_timeout_s and max_connections must be positive")
    too_slow = _raw_response(
        b"408 Request Timeout", f"request headers did not arrive within {header_timeout_s:g} s"
    )
    too_many = _raw_response(b"503 Service Unavailable", "too many open connections; retry shortly")

    class DeadlineProtocol(base):  # type: ignore[misc, valid-type]
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                log.warning(
                    "%d open connections (limit %d): refusing a new one",
                    len(self.connections) - 1,
                    max_connections,
                )
                transport.write(too_many)
                transport.close()
                return
            self._arm()

        def data_received(self, data: bytes) -> None:
            before = self.cycle
            if self._header_timer is None and (before is None or before.response_complete):
                self._arm()  # the first bytes of the next request on a kept-alive connection
            super().data_received(data)
            if self.cycle is not before:  # uvicorn starts a cycle once a request's headers are in
                self._disarm()

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._header_timer = self.loop.call_later(header_timeout_s, self._headers_late)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            if self.transport.is_closing():
                return
            if self.cycle is None or self.cycle.response_complete:
                self.transport.write(too_slow)
            self.transport.close()

    DeadlineProtocol.__name__ = f"Deadline{base.__name__}"
    return DeadlineProtocol


def protocol_for(settings, *, sidecar: bool) -> type[asyncio.Protocol]:
    """The protocol class for the engine API (`sidecar=False`) or the sidecar."""
    cap = settings.sidecar_max_connections if sidecar else settings.max_connections
    return deadline_protocol(settings.header_timeout_s, cap)
