"""The engine checks the key before reading a byte of the body, bounds every body (declared,
streamed, trickled), and refuses oversized fields with a 400 naming the field."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgi_calls import call
from sec_fakes import API_KEY, MODEL, FakeEngine

from serving.server.base.state import Phase
from serving.server.service.app import create_app
from vigil.config import load_settings

AUTH = ("authorization", f"Bearer {API_KEY}")
JSON = ("content-type", "application/json")


def engine_app(engine=None, **overrides):
    values = dict(
        api_keys=[API_KEY],
        model_name=MODEL,
        sample_rate=0.0,
        segment_min_per_hour=0,
        max_request_bytes=64 * 1024,
    )
    values.update(overrides)
    app = create_app(load_settings(**values), engine=engine or FakeEngine(), log_traffic=False)
    app.state.vigil.phase = Phase.READY  # the lifespan would do this; calls here skip it
    return app


def run(coro):
    return asyncio.run(coro)


def endless(size: int = 64 * 1024, total: int = 16 * 1024 * 1024):
    """A body far past every limit (finite, so code without a limit fails instead of hanging)."""
    for _ in range(total // size):
        yield b"x" * size


def test_no_key_is_401_before_any_body_is_read():
    """Was: the body was read and parsed whole, then 401 (a 200 MB POST: 5 s, +190 MB)."""
    result = run(
        call(engine_app(), "POST", "/v1/chat/completions", headers=[JSON], chunks=endless())
    )
    assert result.status == 401 and result.chunks_read == 0
    assert result.json()["error"]["code"] == "missing_api_key"
    wrong = run(
        call(
            engine_app(),
            "POST",
            "/v1/completions",
            headers=[JSON, ("authorization", "Bearer nope")],
            chunks=endless(),
        )
    )
    assert wrong.status == 401 and wrong.chunks_read == 0


def test_declared_oversized_body_is_413_unread():
    result = run(
        call(
            engine_app(),
            "POST",
            "/v1/chat/completions",
            headers=[AUTH, JSON, ("content-length", str(10**9))],
            chunks=endless(),
        )
    )
    assert result.status == 413 and result.chunks_read == 0
    assert result.json()["error"]["type"] == "invalid_request_error"


def test_streamed_body_stops_at_the_limit():
    result = run(
        call(
            engine_app(),
            "POST",
            "/v1/chat/completions",
            headers=[AUTH, JSON],
            chunks=endless(16 * 1024),
        )
    )
    assert result.status == 413
    assert result.chunks_read <= 64 // 16 + 1  # stopped right past the 64 KiB limit


def test_trickled_body_times_out():
    app = engine_app(body_timeout_s=0.3)
    result = run(
        call(
            app,
            "POST",
            "/v1/chat/completions",
            headers=[AUTH, JSON],
            chunks=(b" " for _ in range(1000)),
            chunk_delay_s=0.05,
        )
    )
    assert result.status == 408 and result.chunks_read < 20


def _post(body: dict, app=None):
    return run(
        call(
            app or engine_app(),
            "POST",
            "/v1/chat/completions",
            headers=[AUTH, JSON],
            chunks=[json.dumps(body).encode()],
        )
    )


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"stop": ["x" * 200_000]}, "stop"),  # was accepted (four of these: O(T^2) per token)
        ({"stop": "y" * 257}, "stop"),
        ({"stop": [f"s{i}" for i in range(17)]}, "stop"),
        ({"messages": [{"role": "user", "content": "hi"}] * 513}, "messages"),
        (
            {"messages": [{"role": "user", "content": "z" * (512 * 1024 + 1)}]},
            "messages.[0].content",
        ),
        (
            {"tools": [{"type": "function", "function": {"name": f"f{i}"}} for i in range(65)]},
            "tools",
        ),
    ],
)
def test_oversized_fields_are_400_naming_the_field(extra, param):
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 2,
        **extra,
    }
    app = engine_app(max_request_bytes=4 * 1024 * 1024)
    result = _post(body, app)
    assert result.status == 400, result.body[:300]
    assert result.json()["error"]["param"] == param


def test_long_chat_rendering_and_tokenizing_run_off_the_event_loop():
    """A long conversation is templated and tokenized in a worker thread, so it cannot stall the
    other streams; a short one stays on the loop, where the thread hop would cost more."""
    from serving.server.base.offload import INLINE_LIMIT

    engine = FakeEngine()
    long = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hi " * INLINE_LIMIT}],
        "max_tokens": 2,
    }
    result = _post(long, engine_app(engine))
    assert result.status == 200, result.body
    assert engine.tokenizer.threads and "MainThread" not in engine.tokenizer.threads

    engine = FakeEngine()
    short = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    result = _post(short, engine_app(engine))
    assert result.status == 200, result.body
    assert engine.tokenizer.threads and set(engine.tokenizer.threads) == {"MainThread"}


def test_health_does_not_leak_the_load_error():
    app = engine_app()
    state = app.state.vigil
    state.engine, state.phase, state.load_error = (
        None,
        Phase.FAILED,
        "OSError: /secret/path/model.gguf",
    )
    result = run(call(app, "GET", "/health"))
    assert result.status == 503 and b"secret" not in result.body
