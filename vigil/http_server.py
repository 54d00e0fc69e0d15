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

One client address may hold at most `per_address` of the open connections, and at most
`unauthenticated` connections on which no request has yet passed a key check (the request
guard or the page check put a `principal` in the request's state): half-open sockets from one
address cannot take the slots every other client needs. Past either, a new connection from
that address gets a 429 and is closed. A trusted proxy's address carries many clients and is
held to the process cap only.

The address is the TCP peer: uvicorn's `proxy_headers` is off in every server Vigil runs
(`uvicorn_config`), so no `X-Forwarded-For` replaces it before Vigil's own trusted-proxy check
(`vigil/auth_throttle.py`) decides whom to believe.

    config = uvicorn_config(app, settings, sidecar=False, host=..., port=...)
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from vigil.keys import from_trusted_proxy

log = logging.getLogger("vigil.http")


def _raw_response(status: bytes, message: str) -> bytes:
    body = message.encode()
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body
    )


@dataclass(frozen=True)
class AddressCaps:
    """Per client address: open connections, and those not yet past a key check."""

    per_address: int
    unauthenticated: int
    exempt: tuple[str, ...] = ()  # trusted proxies: the process cap only


@dataclass(frozen=True)
class _Door:
    """What one server's protocol class enforces: the deadline, the caps, the prepared answers,
    and the server's open connections per client address."""

    header_timeout_s: float
    max_connections: int
    limits: AddressCaps
    too_slow: bytes
    too_many: bytes
    too_many_here: bytes
    by_address: dict[str, set[Any]] = field(default_factory=dict)


class _DeadlineMixin(asyncio.Protocol):
    """The header clock and the caps, put before uvicorn's protocol in its class's MRO."""

    _door: _Door  # set per server by deadline_protocol
    # uvicorn's protocol attributes this reads
    connections: set[Any]
    client: tuple[str, int] | None
    cycle: Any
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    _header_timer: asyncio.TimerHandle | None = None
    _address: str | None = None
    _authenticated = False

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        door = self._door
        if len(self.connections) > door.max_connections:
            log.warning(
                "%d open connections (limit %d): refusing a new one",
                len(self.connections) - 1,
                door.max_connections,
            )
            self._refuse(transport, door.too_many)
            return
        address = self.client[0] if self.client else None
        if address is not None and not from_trusted_proxy(address, list(door.limits.exempt)):
            held = door.by_address.setdefault(address, set())
            if len(held) >= door.limits.per_address or (
                sum(not c.authenticated() for c in held) >= door.limits.unauthenticated
            ):
                log.warning("%s holds %d connections: refusing a new one", address, len(held))
                self._refuse(transport, door.too_many_here)
                return
            held.add(self)
            self._address = address
        self._arm()

    def _refuse(self, transport: Any, answer: bytes) -> None:
        transport.write(answer)
        transport.close()

    def authenticated(self) -> bool:
        """Whether a request on this connection has passed a key check (sticky)."""
        if not self._authenticated and self.cycle is not None:
            state = self.cycle.scope.get("state") or {}
            self._authenticated = state.get("principal") is not None
        return self._authenticated

    def data_received(self, data: bytes) -> None:
        before = self.cycle
        if before is not None:
            self.authenticated()  # read the finished request's state before the next one
        if self._header_timer is None and (before is None or before.response_complete):
            self._arm()  # the first bytes of the next request on a kept-alive connection
        super().data_received(data)
        if self.cycle is not before:  # uvicorn starts a cycle once a request's headers are in
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._address is not None:
            held = self._door.by_address.get(self._address)
            if held is not None:
                held.discard(self)
                if not held:
                    del self._door.by_address[self._address]
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._header_timer = self.loop.call_later(self._door.header_timeout_s, self._headers_late)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete:
            self.transport.write(self._door.too_slow)
        self.transport.close()


def deadline_protocol(
    header_timeout_s: float,
    max_connections: int,
    base: type[asyncio.Protocol] = AutoHTTPProtocol,
    caps: AddressCaps | None = None,
) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (httptools, or h11 without it) with a header deadline, a
    connection cap and per-address caps; pass it as `uvicorn.Config(http=...)`."""
    if header_timeout_s <= 0 or max_connections < 1:
        raise ValueError("header_timeout_s and max_connections must be positive")
    limits = caps or AddressCaps(max_connections, max_connections)
    door = _Door(
        header_timeout_s,
        max_connections,
        limits,
        too_slow=_raw_response(
            b"408 Request Timeout", f"request headers did not arrive within {header_timeout_s:g} s"
        ),
        too_many=_raw_response(
            b"503 Service Unavailable", "too many open connections; retry shortly"
        ),
        too_many_here=_raw_response(
            b"429 Too Many Requests",
            f"this address holds too many open connections (at most {limits.per_address}, of "
            f"them {limits.unauthenticated} before a key is checked); close some and retry",
        ),
    )
    return type(f"Deadline{base.__name__}", (_DeadlineMixin, base), {"_door": door})


def protocol_for(settings, *, sidecar: bool) -> type[asyncio.Protocol]:
    """The protocol class for the engine API (`sidecar=False`) or the sidecar."""
    if sidecar:
        cap = settings.sidecar_max_connections
        caps = AddressCaps(
            settings.sidecar_max_connections_per_address,
            settings.sidecar_max_unauthenticated_per_address,
            tuple(settings.trusted_proxies),
        )
    else:
        cap = settings.max_connections
        caps = AddressCaps(
            settings.max_connections_per_address,
            settings.max_unauthenticated_per_address,
            tuple(settings.trusted_proxies),
        )
    return deadline_protocol(settings.header_timeout_s, cap, caps=caps)


def uvicorn_config(app: Any, settings, *, sidecar: bool, **options: Any) -> uvicorn.Config:
    """uvicorn's config for one of Vigil's servers: the header deadline and the connection caps,
    and no proxy headers (uvicorn would otherwise let any loopback peer's `X-Forwarded-For`
    and `X-Forwarded-Proto` replace the client address before Vigil's trusted-proxy check)."""
    for owned in ("proxy_headers", "forwarded_allow_ips", "http"):
        if owned in options:
            raise TypeError(f"{owned} is set by vigil.http_server.uvicorn_config")
    return uvicorn.Config(
        app, proxy_headers=False, http=protocol_for(settings, sidecar=sidecar), **options
    )
