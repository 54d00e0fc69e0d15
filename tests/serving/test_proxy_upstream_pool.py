"""The proxy's upstream connections: kept alive and reused across requests (a new TCP
connection per request costs the upstream's event loop an accept and a connection set-up on
every request's path to its first token), never closed under a request that took one from the
pool, and with Nagle's algorithm off on both sockets so a relayed piece leaves at once."""

from __future__ import annotations

import asyncio
import socket
import threading

import httpx
import openai
import pytest
from fake_upstream import WORDS, ListSink
from sidecar_servers import UvicornThread

from serving.proxy.main import build_proxy
from serving.proxy.upstream import UpstreamPool
from vigil.config import load_settings

CLIENT_KEY = "proxy-client-key-0123456789"
CHAT = [{"role": "user", "content": "Where is the cat?"}]


@pytest.fixture
def proxy(upstream, tmp_path):
    settings = load_settings(
        database_url=f"sqlite:///{tmp_path}/p.db",
        api_keys=[CLIENT_KEY],
        proxy_upstream_url=upstream.url,
        sample_rate=1.0,
    )
    sink = ListSink()
    with UvicornThread(build_proxy(settings, writer=sink, sampler_seed=0)) as server:
        server.sink = sink
        yield server


def test_requests_one_after_another_share_one_upstream_connection(proxy, upstream):
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key=CLIENT_KEY, max_retries=0)
    for _ in range(4):
        stream = client.chat.completions.create(model="m", messages=CHAT, stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "".join(
            WORDS
        )
        reply = client.chat.completions.create(model="m", messages=CHAT)
        assert reply.choices[0].message.content == "".join(WORDS)
    assert len(upstream.peers) == 8 and len(set(upstream.peers)) == 1


def test_concurrent_streams_reuse_pooled_connections_without_cutting_one_off(proxy, upstream):
    upstream.delay_s = 0.01
    body = {"model": "m", "messages": CHAT, "stream": True}
    headers = {"Authorization": f"Bearer {CLIENT_KEY}"}

    async def one(client: httpx.AsyncClient) -> bytes:
        async with client.stream(
            "POST", f"{proxy.url}/v1/chat/completions", json=body, headers=headers
        ) as r:
            assert r.status_code == 200
            return b"".join([piece async for piece in r.aiter_raw()])

    async def rounds() -> list[bytes]:
        async with httpx.AsyncClient(timeout=10) as client:
            out: list[bytes] = []
            for _ in range(3):
                out += await asyncio.gather(*[one(client) for _ in range(8)])
            return out

    answers = asyncio.run(rounds())
    assert answers == [upstream.last_stream] * 24  # every stream whole, none broken off
    assert len(upstream.peers) == 24 and len(set(upstream.peers)) <= 8


def test_pooled_and_accepted_sockets_have_nagle_off(proxy, upstream):
    pool = UpstreamPool(upstream.url, timeout_s=5)

    async def pooled_nodelay() -> int:
        answer = await pool.request(b"GET", b"/v1/models", [], b"")
        await answer.read()
        answer.release()
        [conn] = pool._idle  # back in the pool, open
        sock = conn.transport.get_extra_info("socket")
        value = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        pool.close()
        return value

    assert asyncio.run(pooled_nodelay()) == 1
    accepted: list[int] = []
    seen = threading.Event()
    with httpx.Client() as client:  # one kept-alive connection to the proxy, held open
        client.get(f"{proxy.url}/health")
        for protocol in proxy.server.server_state.connections:
            sock = protocol.transport.get_extra_info("socket")
            accepted.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            seen.set()
    assert seen.is_set() and set(accepted) == {1}
