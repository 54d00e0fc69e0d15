"""A fake OpenAI-compatible upstream for the proxy tests (Starlette under uvicorn on loopback):
chat and completions, streamed slowly or at once; `mode` makes it break off mid-stream or
answer 429/500; it records the headers it saw and which streams were cut off by the client."""

from __future__ import annotations

import asyncio
import json
import threading

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

WORDS = ["The", " cat", " sat", " on", " the", " mat", "."]


def chat_events(model: str, words: list[str], logprobs: bool, usage: bool) -> list[bytes]:
    events = [
        {
            "id": "chatcmpl-up",
            "object": "chat.completion.chunk",
            "model": model,
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
            ],
        }
    ]
    for i, word in enumerate(words):
        choice = {
            "index": 0,
            "delta": {"content": word},
            "finish_reason": "stop" if i == len(words) - 1 else None,
        }
        if logprobs:
            choice["logprobs"] = {
                "content": [{"token": word, "logprob": -0.5, "bytes": None, "top_logprobs": []}]
            }
        events.append(
            {
                "id": "chatcmpl-up",
                "object": "chat.completion.chunk",
                "model": model,
                "choices": [choice],
            }
        )
    if usage:
        events.append(
            {
                "id": "chatcmpl-up",
                "object": "chat.completion.chunk",
                "model": model,
                "choices": [],
                "usage": {
                    "prompt_tokens": 12,
                    "completion_tokens": len(words),
                    "total_tokens": 12 + len(words),
                },
            }
        )
    return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]


class FakeUpstream:
    def __init__(self) -> None:
        self.mode = "ok"  # ok | break | 429 | 500
        self.delay_s = 0.0
        self.seen_auth: list[str | None] = []
        self.peers: list[int] = []  # the client port of each completion: one per connection
        self.aborted = threading.Event()
        self.finished = threading.Event()
        self.last_stream: bytes = b""

        async def chat(request: Request) -> Response:
            body = await request.json()
            self.peers.append(request.client.port if request.client else -1)
            self.seen_auth.append(request.headers.get("authorization"))
            if self.mode == "429":
                return JSONResponse(
                    {"error": {"message": "slow down", "type": "rate_limit"}},
                    429,
                    headers={"retry-after": "7", "x-ratelimit-remaining-requests": "0"},
                )
            if self.mode == "500":
                return JSONResponse(
                    {"error": {"message": "upstream exploded", "type": "server_error"}}, 500
                )
            model = body.get("model", "m")
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            if not body.get("stream"):
                return JSONResponse(
                    {
                        "id": "chatcmpl-up",
                        "object": "chat.completion",
                        "model": model,
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": "".join(WORDS)},
                            }
                        ],
                        "usage": {
                            "prompt_tokens": 12,
                            "completion_tokens": len(WORDS),
                            "total_tokens": 19,
                        },
                    }
                )
            events = chat_events(model, WORDS, bool(body.get("logprobs")), usage)
            self.last_stream = b"".join(events)

            async def stream():
                try:
                    for i, event in enumerate(events):
                        if self.mode == "break" and i == 3:
                            raise RuntimeError("upstream died mid-stream")
                        yield event
                        if self.delay_s:
                            await asyncio.sleep(self.delay_s)
                    self.finished.set()
                except asyncio.CancelledError:
                    self.aborted.set()
                    raise

            return StreamingResponse(stream(), media_type="text/event-stream")

        async def models(request: Request) -> Response:
            self.seen_auth.append(request.headers.get("authorization"))
            return JSONResponse(
                {
                    "object": "list",
                    "data": [{"id": "up-model", "object": "model", "owned_by": "upstream"}],
                }
            )

        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", chat, methods=["POST"]),
                Route("/v1/completions", chat, methods=["POST"]),
                Route("/v1/models", models),
            ]
        )


class ListSink:
    """A record sink that keeps what it is given (in place of storage's writer)."""

    def __init__(self) -> None:
        self.records: list[dict] = []

    def submit(self, record: dict) -> bool:
        self.records.append(record)
        return True

    def close(self, timeout: float = 10.0) -> None:
        pass
