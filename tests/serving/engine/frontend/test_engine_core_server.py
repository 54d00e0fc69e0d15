"""A real server over a separate engine core: killing the core process makes /health fail and
ends in-flight requests with a 5xx (in-band for a stream, with the same type and code, also as
the `openai` client reads it) instead of hanging; the supervisor restarts the core and the
server answers again. /v1/models names the same engine as in-process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading

import httpx
import openai
import pytest
from core_fixtures import tiny_config, tiny_model_dir
from test_server_support import API_KEY, ServerThread, make_settings, wait_for

from serving.engine.frontend.core_client import EngineCoreClient
from serving.server.service.app import create_app

AUTH = {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    engine = EngineCoreClient(tiny_config(tiny_model_dir(tmp_path_factory.mktemp("core-srv"))))
    engine.start()
    yield engine
    asyncio.run(engine.shutdown())


def test_killed_core_fails_requests_with_5xx_health_503_then_recovers(client):
    settings = make_settings()
    body = {
        "model": settings.model_name,
        "prompt": "abc",
        "max_tokens": 450,
        "ignore_eos": True,
        "temperature": 0,
    }
    results: dict[str, object] = {}

    with ServerThread(create_app(settings, engine=client, log_traffic=False)) as srv:

        def stream() -> None:
            with httpx.stream(
                "POST",
                srv.url + "/v1/completions",
                json={**body, "stream": True},
                headers=AUTH,
                timeout=60,
            ) as r:
                results["stream_status"] = r.status_code
                results["lines"] = [line for line in r.iter_lines() if line]

        def plain() -> None:
            r = httpx.post(srv.url + "/v1/completions", json=body, headers=AUTH, timeout=60)
            results["plain"] = (r.status_code, r.json())

        def sdk() -> None:
            sdk_client = openai.OpenAI(
                base_url=srv.url + "/v1", api_key=API_KEY, max_retries=0, timeout=60
            )
            try:
                kw = {k: v for k, v in body.items() if k != "ignore_eos"}
                for _ in sdk_client.completions.create(
                    stream=True, extra_body={"ignore_eos": True}, **kw
                ):
                    pass
            except openai.APIError as exc:
                results["sdk"] = exc

        threads = [threading.Thread(target=f) for f in (stream, plain, sdk)]
        for t in threads:
            t.start()
        assert wait_for(lambda: client.stats().num_running == 3, timeout=30)
        old_pid = client.core_pid
        os.kill(old_pid, signal.SIGKILL)
        assert wait_for(lambda: httpx.get(srv.url + "/health").status_code == 503, timeout=10)
        for t in threads:
            t.join(30)
            assert not t.is_alive(), "a request hung after the engine core died"

        status, payload = results["plain"]
        assert status == 500 and payload["error"]["code"] == "engine_dead", payload
        assert results["stream_status"] == 200
        lines = results["lines"]
        assert lines[-1] == "data: [DONE]"
        error = json.loads(lines[-2][len("data: ") :])["error"]  # in-band: the headers were sent
        assert "engine core process died" in error["message"]
        assert (
            error == payload["error"] and error["type"] == "internal_error"
        )  # as the non-streaming 500
        sdk_error = results["sdk"]
        assert (sdk_error.code, sdk_error.type) == ("engine_dead", "internal_error")

        assert wait_for(lambda: httpx.get(srv.url + "/health").status_code == 200, timeout=120)
        assert client.core_pid != old_pid
        r = httpx.post(
            srv.url + "/v1/completions", json={**body, "max_tokens": 5}, headers=AUTH, timeout=60
        )
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 5


def _engine_card(engine) -> dict:
    settings = make_settings()
    with ServerThread(create_app(settings, engine=engine, log_traffic=False)) as srv:
        r = httpx.get(srv.url + "/v1/models", headers=AUTH, timeout=30)
        one = httpx.get(srv.url + f"/v1/models/{settings.model_name}", headers=AUTH, timeout=30)
    assert r.status_code == 200 and one.status_code == 200
    (card,) = r.json()["data"]
    assert one.json()["engine"] == card["engine"]
    return card["engine"]


def test_models_report_the_same_engine_identity_in_both_modes(client, tmp_path_factory):
    """The separate core's device, dtype and attention backend come from its ready message."""
    import torch

    from serving.attention import get_backend
    from serving.engine import AsyncLLMEngine, LLMEngine

    separate = _engine_card(client)
    inprocess = AsyncLLMEngine(
        LLMEngine(tiny_config(tiny_model_dir(tmp_path_factory.mktemp("core-srv-in"))))
    )
    inprocess.start()
    try:
        in_card = _engine_card(inprocess)
    finally:
        asyncio.run(inprocess.shutdown())
    assert separate == in_card
    assert separate["device"] == "cpu" and separate["dtype"] == str(torch.float32)
    assert separate["attention"] == get_backend(torch.device("cpu")).name
    assert "?" not in separate.values()
