"""One client address cannot hold every connection slot: the sidecar, run by its production
config, caps the connections one address holds and, smaller, those on which no request has yet
passed a key check. 260 idle sockets from 127.0.0.1 leave `/health` answering another address
(127.0.0.2: loopback answers the whole 127/8)."""

from __future__ import annotations

import socket
from contextlib import ExitStack

import httpx
from sec_fakes import API_KEY
from sec_servers import settings_for, sidecar_server


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _idle(port: int, stack: ExitStack) -> socket.socket:
    conn = stack.enter_context(socket.create_connection(("127.0.0.1", port)))
    conn.settimeout(10)
    return conn


def _health_from(url: str, source: str) -> int:
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport, timeout=10) as client:
        return client.get(f"{url}/health").status_code


def test_idle_sockets_from_one_address_do_not_starve_health(migrated_db):
    """Was: the 257th connection and every later one, /health from another address included,
    got 503 while one address held 256 idle sockets."""
    settings = settings_for(database_url=migrated_db, header_timeout_s=30)
    with sidecar_server(settings) as url, ExitStack() as stack:
        socks = [_idle(_port(url), stack) for _ in range(260)]
        # connections are accepted in order: once the last is answered, all were counted
        refusal = socks[-1].recv(4096)
        assert refusal.startswith((b"HTTP/1.1 429", b"HTTP/1.1 503")), refusal[:80]
        assert _health_from(url, "127.0.0.2") == 200
    assert b"429 Too Many Requests" in refusal and b"this address holds" in refusal


def test_connections_past_a_key_check_count_against_the_larger_cap(migrated_db):
    """An address may keep `per_address` kept-alive connections once they authenticated, but
    only `unauthenticated` that have not."""
    settings = settings_for(
        database_url=migrated_db,
        sidecar_max_connections_per_address=8,
        sidecar_max_unauthenticated_per_address=3,
    )
    request = (
        b"GET /alerts HTTP/1.1\r\nHost: s\r\nAuthorization: Bearer "
        + API_KEY.encode()
        + b"\r\n\r\n"
    )
    with sidecar_server(settings) as url, ExitStack() as stack:
        port = _port(url)
        for _ in range(6):  # six keyed, kept alive: past the unauthenticated cap of 3
            conn = _idle(port, stack)
            conn.sendall(request)
            assert conn.recv(65536).startswith(b"HTTP/1.1 200"), "a keyed page read"
        quiet = [_idle(port, stack) for _ in range(3)]  # 9 open: one past the address's cap
        assert quiet[-1].recv(4096).startswith(b"HTTP/1.1 429")
        for conn in quiet[:2]:  # the keyed six did not count against the unauthenticated 3
            conn.sendall(b"GET /health HTTP/1.1\r\nHost: s\r\n\r\n")
            assert conn.recv(4096).startswith(b"HTTP/1.1 200")
        assert _health_from(url, "127.0.0.2") == 200
    with sidecar_server(settings) as url, ExitStack() as stack:
        quiet = [_idle(_port(url), stack) for _ in range(4)]
        assert quiet[-1].recv(4096).startswith(b"HTTP/1.1 429")  # the 4th before any key
