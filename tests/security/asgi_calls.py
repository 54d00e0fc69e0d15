"""Call an ASGI app directly with a scripted body, to see what the app read and answered."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable


class Call:
    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: dict[bytes, bytes] = {}
        self.body = b""
        self.chunks_read = 0

    def json(self) -> dict:
        return json.loads(self.body)


async def call(
    app,
    method: str,
    path: str,
    *,
    headers: Iterable[tuple[str, str]] = (),
    chunks: Iterable[bytes] = (),
    chunk_delay_s: float = 0.0,
    client=("127.0.0.1", 5000),
) -> Call:
    """Send `chunks` as the body (lazily: a chunk is produced only when the app asks)."""
    result = Call()
    pending = iter(chunks)
    body_done = False

    async def receive():
        nonlocal body_done
        if body_done:
            await asyncio.sleep(3600)  # nothing more: a connected, idle client
        try:
            chunk = next(pending)
        except StopIteration:
            body_done = True
            return {"type": "http.request", "body": b"", "more_body": False}
        result.chunks_read += 1
        if chunk_delay_s:
            await asyncio.sleep(chunk_delay_s)
        return {"type": "http.request", "body": chunk, "more_body": True}

    async def send(message):
        if message["type"] == "http.response.start":
            result.status = message["status"]
            result.headers = dict(message.get("headers", []))
        elif message["type"] == "http.response.body":
            result.body += message.get("body", b"")

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers],
        "client": client,
        "server": ("127.0.0.1", 8000),
        "root_path": "",
    }
    await asyncio.wait_for(app(scope, receive, send), 30)
    return result
