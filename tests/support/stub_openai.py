"""An OpenAI-compatible chat server on a loopback port for instrumentation tests: answers
`POST /v1/chat/completions` plainly or as a server-sent event stream (with the usage chunk when
`stream_options.include_usage` asks for it), deterministically from the last user message."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL_SUFFIX = "-2025-01-01"  # the response names a dated model, as OpenAI does


def answer_of(messages: list[dict[str, Any]]) -> str:
    last = next((m for m in reversed(messages) if m.get("role") == "user"), {})
    content = last.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    return f"Answer to: {text}"


def _usage(prompt: str, answer: str) -> dict[str, int]:
    n_in, n_out = len(prompt.split()) + 3, len(answer.split())
    return {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}


class StubOpenAI:
    """`requests` counts chat calls."""

    def __init__(self) -> None:
        self.requests = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._json(404, {"error": {"message": "not found"}})
                    return
                stub.requests += 1
                answer = answer_of(body.get("messages", []))
                prompt = " ".join(str(m.get("content")) for m in body.get("messages", []))
                model = str(body.get("model", "stub")) + MODEL_SUFFIX
                ident = f"chatcmpl-stub{stub.requests}"
                if body.get("stream"):
                    usage = (body.get("stream_options") or {}).get("include_usage")
                    self._stream(ident, model, answer, _usage(prompt, answer) if usage else None)
                    return
                self._json(
                    200,
                    {
                        "id": ident,
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": model,
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": answer},
                            }
                        ],
                        "usage": _usage(prompt, answer),
                    },
                )

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(
                self, ident: str, model: str, answer: str, usage: dict[str, int] | None
            ) -> None:
                chunks: list[dict[str, Any]] = []
                base = {
                    "id": ident,
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": model,
                }
                words = answer.split(" ")
                for i, word in enumerate(words):
                    delta = {"content": word if i == 0 else " " + word}
                    if i == 0:
                        delta["role"] = "assistant"
                    chunks.append({**base, "choices": [{"index": 0, "delta": delta}]})
                chunks.append(
                    {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
                )
                if usage:
                    chunks.append({**base, "choices": [], "usage": usage})
                data = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks)
                data += b"data: [DONE]\n\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> StubOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
