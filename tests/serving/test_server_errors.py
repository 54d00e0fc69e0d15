"""Bad input never produces a 5xx: hand-written cases (each a 400 naming the parameter), a full
waiting queue (429), client disconnects (aborted, blocks freed) and schemathesis fuzzing."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_server_support import (
    API_KEY,
    MAX_MODEL_LEN,
    ServerThread,
    make_settings,
    new_engine,
    shared_engine,
    wait_for,
)

from serving.server.service.app import create_app

AUTH = {"Authorization": f"Bearer {API_KEY}"}
MSG = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def server():
    settings = make_settings()
    with ServerThread(create_app(settings, engine=shared_engine(), log_traffic=False)) as srv:
        srv.model = settings.model_name
        yield srv


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as client:
        yield client


def _chat(model, **kw):
    return {"model": model, "messages": MSG, "max_tokens": 2, **kw}


LONG = "word " * (MAX_MODEL_LEN + 50)

# (name, path, body builder(model) -> body, expected param, expected code or None)
CASES = [
    ("negative max_tokens", "chat", lambda m: _chat(m, max_tokens=-1), "max_tokens", None),
    (
        "zero max_completion_tokens",
        "chat",
        lambda m: _chat(m, max_completion_tokens=0),
        "max_completion_tokens",
        None,
    ),
    ("unknown model", "chat", lambda m: _chat("gpt-nope"), "model", "model_not_found"),
    (
        "bad role",
        "chat",
        lambda m: {"model": m, "messages": [{"role": "wizard", "content": "x"}]},
        "messages.[0].role",
        None,
    ),
    ("no messages", "chat", lambda m: {"model": m, "messages": []}, "messages", None),
    (
        "missing content",
        "chat",
        lambda m: {"model": m, "messages": [{"role": "user"}]},
        "messages.[0]",
        None,
    ),
    (
        "image part",
        "chat",
        lambda m: {
            "model": m,
            "messages": [
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
            ],
        },
        "messages.[0].content",
        None,
    ),
    (
        "prompt longer than context",
        "chat",
        lambda m: {"model": m, "messages": [{"role": "user", "content": LONG}]},
        "messages",
        "context_length_exceeded",
    ),
    (
        "prompt + max_tokens over context",
        "completions",
        lambda m: {"model": m, "prompt": "hello", "max_tokens": MAX_MODEL_LEN},
        "max_tokens",
        "context_length_exceeded",
    ),
    ("temperature too high", "chat", lambda m: _chat(m, temperature=5), "temperature", None),
    ("n zero", "chat", lambda m: _chat(m, n=0), "n", None),
    ("top_logprobs without logprobs", "chat", lambda m: _chat(m, top_logprobs=3), None, None),
    (
        "top_logprobs too many",
        "chat",
        lambda m: _chat(m, logprobs=True, top_logprobs=50),
        "top_logprobs",
        None,
    ),
    ("empty stop string", "chat", lambda m: _chat(m, stop=[""]), "stop", None),
    ("seed beyond int64", "chat", lambda m: _chat(m, seed=2**70), "seed", None),
    (
        "token id outside vocab",
        "completions",
        lambda m: {"model": m, "prompt": [1, 2, 10**9]},
        "prompt",
        None,
    ),
    ("negative token id", "completions", lambda m: {"model": m, "prompt": [5, -3]}, "prompt", None),
    ("empty prompt", "completions", lambda m: {"model": m, "prompt": ""}, "prompt", "empty_prompt"),
    ("empty token list", "completions", lambda m: {"model": m, "prompt": []}, "prompt", None),
    (
        "echo with stream unsupported",
        "completions",
        lambda m: {"model": m, "prompt": "x", "echo": True, "stream": True},
        None,
        None,
    ),
    (
        "logprobs too many",
        "completions",
        lambda m: {"model": m, "prompt": "x", "logprobs": 9},
        "logprobs",
        None,
    ),
    (
        "metadata not strings",
        "chat",
        lambda m: _chat(m, metadata={"a": {"b": 1}}),
        "metadata.a",
        None,
    ),
]


@pytest.mark.parametrize("name,path,body,param,code", CASES, ids=[c[0] for c in CASES])
def test_bad_parameters_are_400_naming_the_parameter(http, server, name, path, body, param, code):
    r = http.post(
        f"/v1/{'chat/completions' if path == 'chat' else 'completions'}", json=body(server.model)
    )
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["type"] == "invalid_request_error" and err["message"]
    if param is not None:
        assert err["param"] == param, err
    if code is not None:
        assert err["code"] == code, err


@pytest.mark.parametrize(
    "raw,content_type",
    [
        (b'{"model": "x", "messages": [', "application/json"),  # truncated JSON
        (b"[1, 2, 3]", "application/json"),  # not an object
        (
            b'{"model": "M", "messages": [{"role": "user", "content": "hi"}], "temperature": NaN}',
            "application/json",
        ),
        (
            b'{"model": "M", "messages": [{"role": "user", "content": "\\ud800"}],'
            b' "max_tokens": 1}',
            "application/json",
        ),
        (b"\xff\xfe\x00garbage", "application/json"),
        (b"model=x", "application/x-www-form-urlencoded"),
    ],
    ids=["truncated", "array", "nan", "lone-surrogate", "binary", "form"],
)
def test_malformed_bodies_are_400(http, server, raw, content_type):
    raw = raw.replace(b'"M"', json.dumps(server.model).encode())
    r = http.post("/v1/chat/completions", content=raw, headers={"Content-Type": content_type})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["type"] == "invalid_request_error"


def test_wrong_method_and_path_answer_in_openai_shape(http):
    r = http.get("/v1/chat/completions")
    assert r.status_code == 405 and "error" in r.json()
    r = http.get("/v1/nothing-here")
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"


def _engine_idle(engine) -> bool:
    stats = engine.stats()
    return stats.num_running == 0 and stats.num_waiting == 0 and stats.kv_cache_usage == 0.0


def _aborts(url: str) -> float:
    text = httpx.get(url + "/metrics").text
    for family in text_string_to_metric_families(text):
        if family.name == "vllm:request_success":
            return sum(
                s.value
                for s in family.samples
                if s.name.endswith("_total") and s.labels["finished_reason"] == "abort"
            )
    raise AssertionError("vllm:request_success missing")


def test_client_disconnect_aborts_and_frees_blocks(http, server):
    engine = shared_engine()
    assert wait_for(lambda: _engine_idle(engine))
    before = _aborts(server.url)
    body = {
        "model": server.model,
        "prompt": "Count: 1, 2, 3,",
        "max_tokens": 300,
        "stream": True,
        "temperature": 0,
        "ignore_eos": True,
    }
    with http.stream("POST", "/v1/completions", json=body) as r:
        assert r.status_code == 200
        lines = r.iter_lines()
        got = [next(lines) for _ in range(6)]
        assert any(line.startswith("data: {") for line in got)
        assert engine.stats().num_running == 1
    # closed after a few tokens: the request is aborted and its KV blocks freed long before
    # 300 tokens could have been generated (~15 tokens/s on one CPU thread)
    assert wait_for(lambda: _engine_idle(engine), timeout=5)
    with pytest.raises(httpx.ReadTimeout):  # non-streaming: the client gives up waiting
        http.post("/v1/completions", json={**body, "stream": False}, timeout=1.0)
    assert wait_for(lambda: _engine_idle(engine), timeout=5)
    assert _aborts(server.url) == before + 2


def test_full_waiting_queue_is_429_and_the_rest_still_finish():
    """One sequence at a time and room for two waiting: a burst overflows the queue."""
    engine = new_engine(max_num_seqs=1)
    settings = make_settings(max_waiting_requests=2)
    try:
        with ServerThread(create_app(settings, engine=engine, log_traffic=False)) as srv:

            async def burst():
                async with httpx.AsyncClient(base_url=srv.url, headers=AUTH, timeout=120) as ac:
                    body = {"model": settings.model_name, "prompt": "Hello", "max_tokens": 8,
                            "temperature": 0, "ignore_eos": True}  # fmt: skip
                    long = {**body, "max_tokens": 64, "stream": True}
                    async with ac.stream("POST", "/v1/completions", json=long) as first:
                        lines = first.aiter_lines()
                        while not (await anext(lines)).startswith("data:"):
                            pass  # the first is running (it streamed a token): the rest must wait
                        rest = [
                            asyncio.create_task(ac.post("/v1/completions", json=body))
                            for _ in range(5)
                        ]
                        async for _ in lines:
                            pass
                        first_status = first.status_code
                    return [
                        first_status,
                        *[r.status_code for r in await asyncio.gather(*rest)],
                    ], rest

            codes, rest = asyncio.run(burst())
            assert codes[0] == 200 and 429 in codes and set(codes) <= {200, 429}, codes
            refused = next(t.result() for t in rest if t.result().status_code == 429)
            assert (
                refused.json()["error"]["code"] == "queue_full" and refused.headers["retry-after"]
            )
            assert codes.count(200) >= 3  # the running one plus the two that could wait
    finally:
        asyncio.run(engine.shutdown())
