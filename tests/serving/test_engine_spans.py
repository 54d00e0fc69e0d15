"""Engine spans out: `vigil serve` with VIGIL_OTLP_TRACES_ENDPOINT pointing at a running sidecar
sends one GenAI span per request through the SDK's OTLP exporter, and the sidecar's receiver
stores it as a sample record; text goes out only with VIGIL_OTLP_CAPTURE_CONTENT."""

from __future__ import annotations

import time

import httpx
import pytest
from sidecar_servers import API_KEY as SIDECAR_KEY
from sidecar_servers import UvicornThread
from sqlalchemy import select
from test_server_support import API_KEY, ServerThread, make_settings, shared_engine

from serving.server.service.app import create_app
from sidecar.app import create_app as create_sidecar
from storage.db import session_factory
from storage.models import Sample


@pytest.fixture
def sidecar(tmp_path, monkeypatch):
    from storage.migrate import upgrade

    database = f"sqlite:///{tmp_path}/sidecar.db"
    upgrade(database)
    from vigil.config import load_settings

    settings = load_settings(
        database_url=database, api_keys=[SIDECAR_KEY], report_dir=tmp_path / "r"
    )
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Authorization=Bearer%20{SIDECAR_KEY}")
    with UvicornThread(create_sidecar(settings, session_factory(database))) as srv:
        srv.factory = session_factory(database)
        yield srv


def rows(sidecar, n: int, timeout: float = 20.0) -> list[Sample]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with sidecar.factory() as s:
            found = list(s.scalars(select(Sample)))
        if len(found) >= n:
            return found
        time.sleep(0.1)
    return found


@pytest.mark.parametrize("capture", [False, True])
def test_engine_spans_reach_the_sidecar(sidecar, capture):
    settings = make_settings(
        otlp_traces_endpoint=f"{sidecar.url}/v1/traces", otlp_capture_content=capture
    )
    app = create_app(settings, engine=shared_engine(), log_traffic=False)
    assert app.state.vigil.traffic.spans is not None
    with ServerThread(app) as server:
        r = httpx.post(
            f"{server.url}/v1/chat/completions",
            headers={"Authorization": f"Bearer {API_KEY}"},
            json={
                "model": settings.model_name,
                "max_tokens": 5,
                "temperature": 0,
                "messages": [{"role": "user", "content": "Name a colour."}],
            },
            timeout=60,
        )
        assert r.status_code == 200
        answer = r.json()
    app.state.vigil.traffic.close()  # flushes the span batch
    [row] = rows(sidecar, 1)
    assert row.prompt_tokens == answer["usage"]["prompt_tokens"]
    assert row.completion_tokens == answer["usage"]["completion_tokens"]
    assert row.finish_reason == answer["choices"][0]["finish_reason"]
    assert row.model_version == (settings.model_version or settings.model_name)
    assert row.extra["request_id"] == answer["id"] and row.extra["operation"] == "chat"
    assert row.ttft_ms is not None and 0 < row.ttft_ms <= row.latency_ms
    if capture:
        assert (
            "Name a colour." in row.prompt
            and row.response == answer["choices"][0]["message"]["content"]
        )
    else:
        assert row.prompt is None and row.response is None


def test_spans_off_hand_nothing_to_the_logger():
    app = create_app(make_settings(), engine=shared_engine(), log_traffic=False)
    traffic = app.state.vigil.traffic
    assert traffic.spans is None and traffic.sink is None
    with ServerThread(app) as server:
        r = httpx.post(
            f"{server.url}/v1/completions",
            headers={"Authorization": f"Bearer {API_KEY}"},
            json={"model": app.state.vigil.settings.model_name, "prompt": "Hi", "max_tokens": 2},
            timeout=60,
        )
        assert r.status_code == 200
    assert traffic.counters.seen == 0  # the hand-off returned at once
