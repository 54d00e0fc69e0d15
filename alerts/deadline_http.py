"""An HTTP client whose every socket operation also answers to one wall-clock deadline.

httpx's timeouts bound each connect, write and read on its own: a receiver that sends its reply
headers a byte every few seconds never trips the read timeout and holds the caller for as long
as it likes. Here the network streams under the client clamp each operation's timeout to what
is left of a deadline the calling thread set (`within(seconds)`), and raise a timeout once it is
spent, so one call ends at its deadline whatever the peer does — during the connect, while the
request is written, while the reply's headers or body trickle in.

    client = deadline_client()
    with within(30.0):
        client.post(url, content=body, timeout=10.0)   # per operation 10 s, in all 30 s

Outside `within`, the client behaves as a plain httpx.Client. The deadline is per thread, so
several delivery threads may share one client.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpcore
import httpx

_local = threading.local()


class DeadlineSpent(httpcore.ReadTimeout):
    """The thread's deadline passed (httpx turns it into an httpx.ReadTimeout)."""


@contextmanager
def within(seconds: float) -> Iterator[float]:
    """Every network operation of this thread's deadline clients ends `seconds` from now;
    yields the absolute monotonic deadline."""
    previous = getattr(_local, "deadline", None)
    _local.deadline = time.monotonic() + seconds
    try:
        yield _local.deadline
    finally:
        _local.deadline = previous


def _clamp(timeout: float | None) -> float | None:
    deadline = getattr(_local, "deadline", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise DeadlineSpent("the call's deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self.inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.inner.read(max_bytes, _clamp(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.inner.write(buffer, _clamp(timeout))

    def close(self) -> None:
        self.inner.close()

    def start_tls(
        self, ssl_context, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(self.inner.start_tls(ssl_context, server_hostname, _clamp(timeout)))

    def get_extra_info(self, info: str):
        return self.inner.get_extra_info(info)


class DeadlineBackend(httpcore.SyncBackend):
    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options=None,
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(
            super().connect_tcp(host, port, _clamp(timeout), local_address, socket_options)
        )


class DeadlineTransport(httpx.HTTPTransport):
    """httpx's transport over a connection pool whose streams obey the thread's deadline."""

    def __init__(self, verify: bool = True) -> None:
        super().__init__(verify=verify)
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify),
            network_backend=DeadlineBackend(),
            max_connections=100,
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
        )


def deadline_client() -> httpx.Client:
    """A client for webhook calls: no redirects followed, deadlines from `within`."""
    return httpx.Client(transport=DeadlineTransport(), follow_redirects=False)
