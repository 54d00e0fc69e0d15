"""Calls to the sidecar's app in process (no server, no port): a client on the ASGI app, a
login through the login page (the session cookie it sets), an ingest request."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from sidecar.page_auth import COOKIE


def page_client(
    app, base_url: str = "http://sidecar", peer: str = "127.0.0.1", **kwargs: Any
) -> httpx.AsyncClient:
    """An HTTP client on the ASGI app itself, calling from `peer`."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, client=(peer, 4000)), base_url=base_url, **kwargs
    )


async def log_in(client: httpx.AsyncClient, key: str) -> str:
    """Log `client` in through the login page; its session cookie."""
    response = await client.post("/login", data={"key": key, "next": "/alerts"})
    assert response.status_code == 303, response.text
    return client.cookies[COOKIE]


def ingest(app, key: str, samples: list[dict]) -> httpx.Response:
    """POST /v1/ingest with `samples` under bearer `key`."""

    async def go() -> httpx.Response:
        async with page_client(app, base_url="http://s") as c:
            return await c.post(
                "/v1/ingest", json={"samples": samples}, headers={"authorization": f"Bearer {key}"}
            )

    return asyncio.run(go())
