"""Server-sent events in OpenAI's framing: `data: {json}\\n\\n` ... `data: [DONE]\\n\\n`."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

DONE = "data: [DONE]\n\n"


def event(payload: dict) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False, separators=(',', ':'))}\n\n"


def safe_logprob(value: float) -> float:
    """JSON has no -inf/NaN; clamp as vLLM does."""
    return -9999.0 if math.isnan(value) else max(value, -9999.0)


class SSEResponse(StreamingResponse):
    """A streaming response that always closes its generator, so an abandoned stream's engine
    request is aborted at once rather than when the generator is garbage-collected."""

    def __init__(self, content: AsyncIterator[str]):
        super().__init__(content, media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                await aclose()
