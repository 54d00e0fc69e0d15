"""`vigil proxy` in front of `vigil serve` (SmolLM2 on the CPU), both under uvicorn on loopback,
driven by the official `openai` client: greedy answers through the proxy equal the engine's
own, streamed and not, and each is sampled into a real storage writer with the engine's usage."""

from __future__ import annotations

import time

import openai
import pytest
from sidecar_servers import UvicornThread
from sqlalchemy import select
from test_server_support import API_KEY, ServerThread, make_settings, shared_engine

from serving.proxy.main import build_proxy
from serving.server.service.app import create_app
from storage.db import session_factory
from storage.models import Sample
from storage.writer import SampleWriter

PROMPT = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def engine_server():
    settings = make_settings()
    with ServerThread(create_app(settings, engine=shared_engine(), log_traffic=False)) as srv:
        srv.model = settings.model_name
        yield srv


def test_proxy_in_front_of_the_engine(engine_server, tmp_path):
    database = f"sqlite:///{tmp_path}/proxy.db"
    from storage.migrate import upgrade

    upgrade(database)
    settings = make_settings(
        database_url=database,
        journal_dir=tmp_path / "journal",
        sample_rate=1.0,
        proxy_upstream_url=engine_server.url,
        proxy_upstream_api_key=API_KEY,
    )
    writer = SampleWriter.from_settings(settings)
    app = build_proxy(settings, writer=writer, sampler_seed=0)
    direct = openai.OpenAI(base_url=engine_server.url + "/v1", api_key=API_KEY, max_retries=0)
    with UvicornThread(app) as proxy:
        relayed = openai.OpenAI(base_url=proxy.url + "/v1", api_key=API_KEY, max_retries=0)
        kw = dict(model=engine_server.model, messages=PROMPT, max_tokens=12, temperature=0)
        want = direct.chat.completions.create(**kw)
        got = relayed.chat.completions.create(**kw)
        assert got.choices[0].message.content == want.choices[0].message.content
        assert got.usage == want.usage
        streamed = "".join(
            c.choices[0].delta.content or ""
            for c in relayed.chat.completions.create(
                stream=True, stream_options={"include_usage": True}, **kw
            )
            if c.choices
        )
        assert streamed == want.choices[0].message.content
        assert [m.id for m in relayed.models.list()] == [m.id for m in direct.models.list()]
        deadline = time.monotonic() + 10
        while app.proxy.traffic.counters.submitted < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    writer.close(10)
    with session_factory(database)() as s:
        rows = list(s.scalars(select(Sample)))
    assert len(rows) == 2
    for row in rows:
        assert row.response == want.choices[0].message.content and "France" in row.prompt
        assert (row.prompt_tokens, row.completion_tokens) == (
            want.usage.prompt_tokens,
            want.usage.completion_tokens,
        )
        assert row.model_version == engine_server.model and row.latency_ms > 0
    assert sum(row.ttft_ms is not None for row in rows) == 1  # the streamed one
