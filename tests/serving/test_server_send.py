"""SSE bodies skip the app's start-only send wrappers (ServerSend), one write per stream item,
the item ending with [DONE] also ending the body; through the whole app the response start still
passes every layer (the API-server header is added) and the bytes arrive in order."""

from __future__ import annotations

import asyncio
import json
import time

from engine_doubles import EngineClientDouble

from serving.outputs import CompletionOutput, RequestMetrics, RequestOutput
from serving.server.base.server_send import SCOPE_KEY, ServerSend
from serving.server.base.sse import DONE, SSEResponse
from serving.server.processes.api_process import PID_HEADER, ServerPidHeader
from serving.server.service.app import create_app
from vigil.asgi_guard import RequestGuard
from vigil.config import load_settings
from vigil.security_headers import SecurityHeaders

KEY = "k" * 24


async def items(*values: str):
    for v in values:
        yield v


def run_response(response: SSEResponse, scope_send: bool) -> tuple[list[dict], list[dict]]:
    """(messages through the chain's send, messages through the server's send)."""
    chain, server = [], []
    disconnect = asyncio.Event()

    async def receive():
        await disconnect.wait()
        return {"type": "http.disconnect"}

    async def chain_send(message):
        chain.append(message)

    async def server_send(message):
        server.append(message)

    scope = {
        "type": "http",
        "asgi": {"spec_version": "2.3"},
        **({SCOPE_KEY: server_send} if scope_send else {}),
    }

    async def main():
        await response(scope, receive, chain_send)
        disconnect.set()

    asyncio.run(main())
    return chain, server


def test_body_chunks_take_the_server_send_and_the_start_the_chain():
    chain, server = run_response(
        SSEResponse(items("data: 1\n\n", "data: 2\n\n", "data: 3\n\n" + DONE)), True
    )
    assert [m["type"] for m in chain] == ["http.response.start"]
    assert [(m["body"], m["more_body"]) for m in server] == [
        (b"data: 1\n\n", True),
        (b"data: 2\n\n", True),
        (("data: 3\n\n" + DONE).encode(), False),
    ]


def test_without_a_server_send_everything_takes_the_chain():
    chain, server = run_response(SSEResponse(items("data: 1\n\n", DONE)), False)
    assert not server
    assert [m["type"] for m in chain] == [
        "http.response.start",
        "http.response.body",
        "http.response.body",
    ]
    assert chain[-1] == {"type": "http.response.body", "body": DONE.encode(), "more_body": False}


def test_items_after_done_stay_in_order_and_the_body_still_ends():
    _, server = run_response(SSEResponse(items("a", DONE, "b")), True)
    assert b"".join(m["body"] for m in server) == f"a{DONE}b".encode()
    assert [m["more_body"] for m in server] == [True, True, True, False]


def test_only_start_only_layers_sit_inside_server_send():
    """A middleware added inside create_app before ServerSend would not see SSE bodies."""
    app = create_app(
        load_settings(env="development", api_keys=[KEY]),
        engine=EngineClientDouble(),
        log_traffic=False,
    )
    # SecurityHeaders and RequestGuard act on the response start only, so bodies may bypass them
    assert [m.cls for m in app.user_middleware] == [ServerSend, SecurityHeaders, RequestGuard]


class ScriptedEngine(EngineClientDouble):
    """Three outputs per request, at once; enough of the engine surface for the routes."""

    coalesces_outputs = True
    max_model_len = 512

    class tokenizer:  # noqa: N801
        @staticmethod
        def decode(ids, skip_special_tokens=False):
            return "p" * len(ids)

    def num_waiting(self):
        return 0

    def abort(self, request_id):
        pass

    def stats(self):
        return None

    async def generate(self, request_id, ids, params, prompt=None):
        metrics = RequestMetrics(arrival_time=time.monotonic(), first_token_time=time.monotonic())
        for i, text in enumerate(["a", "ab", "ab\u00e9\n"]):
            finish = "length" if i == 2 else None
            yield RequestOutput(
                request_id,
                prompt,
                ids,
                [CompletionOutput(0, text, "", list(range(i + 1)), None, finish)],
                finish is not None,
                metrics,
            )


def test_a_streamed_completion_through_the_app_with_the_pid_header_outside():
    settings = load_settings(
        env="development", api_keys=[KEY], sample_rate=0.0, segment_min_per_hour=0
    )
    app = create_app(settings, engine=ScriptedEngine(), log_traffic=False)
    app.add_middleware(ServerPidHeader, value="0:123")  # as api_process does: outside ServerSend
    body = json.dumps(
        {"model": settings.model_name, "prompt": [1, 2], "stream": True, "max_tokens": 3}
    ).encode()
    sent: list[dict] = []

    async def main():
        delivered, done = False, asyncio.Event()

        async def receive():
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/v1/completions",
            "raw_path": b"/v1/completions",
            "query_string": b"",
            "root_path": "",
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 2),
            "headers": [
                (b"host", b"t"),
                (b"content-type", b"application/json"),
                (b"authorization", f"Bearer {KEY}".encode()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
        async with app.router.lifespan_context(app):
            await app(scope, receive, send)
        done.set()

    asyncio.run(main())
    start, bodies = sent[0], sent[1:]
    assert start["status"] == 200 and (PID_HEADER, b"0:123") in start["headers"]
    assert [m["more_body"] for m in bodies] == [
        True,
        True,
        False,
    ]  # 2 outputs, then the last with [DONE]
    text = b"".join(m["body"] for m in bodies).decode()
    deltas = [
        json.loads(line[6:])["choices"][0]["text"]
        for line in text.split("\n\n")
        if line.startswith("data: {")
    ]
    assert deltas == ["a", "b", "\u00e9\n"] and text.endswith(DONE)
