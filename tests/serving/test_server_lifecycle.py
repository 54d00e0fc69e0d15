"""Lifecycle: a model that cannot be loaded stops the server with the reason; a drain whose
grace runs out aborts what is in flight, and those requests are still logged."""

from __future__ import annotations

import json
import threading

import httpx
from sqlalchemy import select
from test_server_support import API_KEY, ServerThread, make_settings, shared_engine, wait_for

from serving.server.base.state import Phase
from serving.server.service.app import create_app
from storage.db import session_scope
from storage.models import Sample


def test_unloadable_model_reports_the_reason_and_stops_the_server(tmp_path):
    bogus = tmp_path / "broken.gguf"
    bogus.write_bytes(b"GGUF\x03\x00\x00\x00 truncated")
    app = create_app(make_settings(model_path=str(bogus)), log_traffic=False)
    state = app.state.vigil
    server = ServerThread(app)
    with server:
        # while loading (or once failed) the server answers, but not as healthy; the broken file
        # fails fast, so the server may already be gone
        try:
            r = httpx.get(server.url + "/health", timeout=5)
            assert r.status_code == 503 and r.json()["status"] in ("loading", "failed", "stopped")
            r = httpx.post(
                server.url + "/v1/completions",
                timeout=5,
                headers={"Authorization": f"Bearer {API_KEY}"},
                json={"model": state.settings.model_name, "prompt": "x"},
            )
            assert r.status_code == 503 and r.json()["error"]["type"] == "service_unavailable"
        except httpx.TransportError:
            assert not server.thread.is_alive() or state.phase is Phase.FAILED
        assert wait_for(
            lambda: not server.thread.is_alive(), timeout=30
        )  # it asked uvicorn to exit
    assert state.phase is Phase.FAILED
    assert "broken.gguf" in state.load_error


def test_drain_past_its_grace_aborts_in_flight_requests_and_still_logs_them(tmp_path):
    from storage.migrate import upgrade
    from storage.writer import SampleWriter

    db = f"sqlite:///{tmp_path}/drain.db"
    upgrade(db)
    writer = SampleWriter(db, tmp_path / "journal", flush_interval_s=0.05)
    settings = make_settings(drain_grace_s=0.5, sample_rate=1.0, database_url=db)
    app = create_app(settings, engine=shared_engine(), writer=writer)
    lines: list[str] = []
    with ServerThread(app) as server:

        def stream() -> None:
            body = {
                "model": settings.model_name,
                "prompt": "Count: 1, 2,",
                "max_tokens": 400,
                "ignore_eos": True,
                "stream": True,
            }
            with httpx.stream(
                "POST",
                server.url + "/v1/completions",
                json=body,
                timeout=60,
                headers={"Authorization": f"Bearer {API_KEY}"},
            ) as r:
                lines.extend(line for line in r.iter_lines() if line)

        reader = threading.Thread(target=stream)
        reader.start()
        assert wait_for(lambda: app.state.vigil.inflight, timeout=30)
        server.server.begin_drain()
        assert wait_for(lambda: httpx.get(server.url + "/health").status_code == 503, timeout=5)
        reader.join(30)
        assert wait_for(lambda: not server.thread.is_alive(), timeout=30)
    assert lines[-1] == "data: [DONE]"
    last = json.loads(lines[-2][len("data: ") :])
    assert last["choices"][0]["finish_reason"] == "abort"  # cut at the grace limit, not at 400
    writer.close(10)
    with session_scope(db) as s:
        (row,) = s.scalars(select(Sample)).all()
        assert row.finish_reason == "abort" and 0 < row.completion_tokens < 400
