"""Server-sent events in OpenAI's framing: `data: {json}\\n\\n` ... `data: [DONE]\\n\\n`.

A stream sends one event per engine output for each of its choices, and most of them differ
only in the delta text: `EventTemplate` keeps the event's JSON around that one string, so an
event costs one string escape instead of building and serialising a dict.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Callable

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from serving.server.base.server_send import server_send

DONE = "data: [DONE]\n\n"
# stands for the varying string while a template is built; private-use characters, which
# json.dumps(ensure_ascii=False) copies as they are
HOLE = "\ue000vigil-event-hole\ue001"
_escape = json.encoder.encode_basestring  # what json.dumps(ensure_ascii=False) does to a str


def event(payload: dict) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False, separators=(',', ':'))}\n\n"


class EventTemplate:
    """`event(build(text))` for payloads that differ in one string only: the event is written
    once with `HOLE` as that string and kept as the JSON before and after it, so `fill(text)`
    is byte for byte `event(build(text))`. A payload holding `HOLE` elsewhere is built in full."""

    def __init__(self, build: Callable[[str], dict]):
        self.build = build
        parts = event(build(HOLE)).split(_escape(HOLE))
        self.exact = len(parts) == 2
        self.head, self.tail = (parts[0], parts[1]) if self.exact else ("", "")

    def fill(self, text: str) -> str:
        if self.exact:
            return self.head + _escape(text) + self.tail
        return event(self.build(text))


def safe_logprob(value: float) -> float:
    """JSON has no -inf/NaN; clamp as vLLM does."""
    return -9999.0 if math.isnan(value) else max(value, -9999.0)


class SSEResponse(StreamingResponse):
    """A streaming response that always closes its generator, so an abandoned stream's engine
    request is aborted at once rather than when the generator is garbage-collected.

    Each item of `content` is one write: the streams yield all events of one engine output
    together, and the item that ends with `[DONE]` also ends the HTTP body. Body chunks go to
    the HTTP server's own `send` (see server_send.py); the response start takes the full chain."""

    def __init__(self, content: AsyncIterator[str]):
        super().__init__(
            content,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self._body_send: Send | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._body_send = server_send(scope)
        try:
            await super().__call__(scope, receive, send)
        finally:
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                await aclose()

    async def stream_response(self, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        body_send = self._body_send or send
        last = b""
        async for chunk in self.body_iterator:
            data = chunk.encode("utf-8") if isinstance(chunk, str) else bytes(chunk)
            if data.endswith(
                b"data: [DONE]\n\n"
            ):  # the stream's last item: sent with the body's end
                last += data
                continue
            if last:  # never after [DONE] in Vigil's streams; kept in order if it were
                await body_send({"type": "http.response.body", "body": last, "more_body": True})
                last = b""
            await body_send({"type": "http.response.body", "body": data, "more_body": True})
        await body_send({"type": "http.response.body", "body": last, "more_body": False})
