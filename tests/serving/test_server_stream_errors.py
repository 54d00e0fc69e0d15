"""Errors after a stream's headers are sent arrive in-band as one SSE `error` event (then
[DONE]) carrying the same object the non-streaming path answers for the same failure, with an
OpenAI-style `type` and a non-null `code`; read raw over httpx and through the `openai` client.
The separate engine core's death mid-stream is covered in test_engine_core_server."""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest
from test_server_support import API_KEY, ServerThread, make_settings, new_engine

from serving.server.base.errors import APIError, in_band
from serving.server.service.app import create_app

AUTH = {"Authorization": f"Bearer {API_KEY}"}
BODY = {"prompt": "Count: 1, 2, 3,", "max_tokens": 8, "temperature": 0, "ignore_eos": True}


@pytest.fixture(scope="module")
def server():
    """An in-process engine whose next `failures["n"]` steps raise."""
    engine = new_engine(engine_process="inprocess")  # its steps can be made to fail here
    inner = engine.engine
    real_step, failures = inner.step, {"n": 0}

    def step():
        if failures["n"]:
            failures["n"] -= 1
            raise RuntimeError("injected step failure")
        return real_step()

    inner.step = step
    settings = make_settings()
    try:
        with ServerThread(create_app(settings, engine=engine, log_traffic=False)) as srv:
            srv.model, srv.failures = settings.model_name, failures
            yield srv
    finally:
        asyncio.run(engine.shutdown())


def sse_events(url: str, path: str, body: dict) -> tuple[int, list[str]]:
    with httpx.stream(
        "POST", url + path, json={**body, "stream": True}, headers=AUTH, timeout=60
    ) as r:
        return r.status_code, [line for line in r.iter_lines() if line.startswith("data: ")]


@pytest.mark.parametrize(
    "path,extra",
    [
        ("/v1/completions", {}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
    ],
    ids=["completions", "chat"],
)
def test_failed_step_is_an_in_band_error_like_the_non_streaming_500(server, path, extra):
    body = {**BODY, "model": server.model, **extra}
    if "messages" in body:
        del body["prompt"]
    server.failures["n"] = 1
    plain = httpx.post(server.url + path, json=body, headers=AUTH, timeout=60)
    assert plain.status_code == 500
    want = plain.json()["error"]
    assert want["code"] == "engine_step_failed" and want["type"] == "internal_error"
    assert "injected step failure" in want["message"]

    server.failures["n"] = 1
    status, events = sse_events(server.url, path, body)
    assert status == 200 and events[-1] == "data: [DONE]"
    error = json.loads(events[-2][len("data: ") :])["error"]
    assert error == want  # the same object, with its type and code

    server.failures["n"] = 0  # the engine keeps serving
    status, events = sse_events(server.url, path, body)
    assert status == 200 and not any('"error"' in e for e in events)


def test_openai_client_sees_the_in_band_error_type_and_code(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0)
    server.failures["n"] = 1
    stream = client.chat.completions.create(
        model=server.model, messages=[{"role": "user", "content": "hi"}], max_tokens=4, stream=True
    )
    with pytest.raises(openai.APIError) as info:
        for _ in stream:
            pass
    assert info.value.code == "engine_step_failed" and info.value.type == "internal_error"
    assert "injected step failure" in info.value.message
    server.failures["n"] = 1
    with pytest.raises(openai.APIError) as info:
        for _ in client.completions.create(
            model=server.model, prompt="x", max_tokens=4, stream=True
        ):
            pass
    assert info.value.code == "engine_step_failed"


def test_every_in_band_error_has_a_type_and_a_code():
    unexpected = in_band(KeyError("internal detail"))["error"]
    assert unexpected == {
        "message": "internal server error",
        "type": "internal_error",
        "param": None,
        "code": "internal_error",
    }  # nothing internal leaks, as for the 500 handler
    for status in (400, 404, 429, 500, 503):
        err = in_band(APIError("m", status=status))["error"]
        assert err["type"] and err["code"], err
    assert (
        in_band(APIError("m", status=503, code="engine_not_running"))["error"]["code"]
        == "engine_not_running"
    )
