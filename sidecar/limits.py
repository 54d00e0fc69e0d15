"""Request body size limit as pure ASGI middleware.

The declared Content-Length is checked first (a 413 before reading a byte); the streamed body is
counted as it arrives too, so a chunked upload or a lying Content-Length cannot get past it.
"""

from __future__ import annotations

import json

from starlette.exceptions import HTTPException


class BodyTooLarge(HTTPException):
    """An HTTPException so FastAPI's body parsing re-raises it as a 413 (not a generic 400)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the body streamed more than {limit} bytes; the limit is {limit} bytes")


def _413(limit: int, what: str) -> tuple[dict, bytes]:
    body = json.dumps(
        {"detail": f"payload too large: {what}; the limit is {limit} bytes (VIGIL_INGEST_MAX_BYTES)"}
    ).encode()
    start = {
        "type": "http.response.start",
        "status": 413,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
    }
    return start, body


class BodyLimitMiddleware:
    """Limit bodies of requests whose path starts with one of `prefixes` to `max_bytes`."""

    def __init__(self, app, *, max_bytes: int, prefixes: tuple[str, ...]) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.prefixes = prefixes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not scope["path"].startswith(self.prefixes):
            return await self.app(scope, receive, send)
        limit = self.max_bytes
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > limit:
                    return await self._reject(send, f"Content-Length {declared} is too large")
        seen = 0
        started = False

        async def counting_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(limit)
            return message

        async def tracking_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._reject(send, f"the body streamed more than {limit} bytes")

    async def _reject(self, send, what: str) -> None:
        start, body = _413(self.max_bytes, what)
        await send(start)
        await send({"type": "http.response.body", "body": body})
