"""Start-up states: /health is 503 while the model loads, and a model that cannot be loaded
stops the server with the reason (no engine needed for these)."""

from __future__ import annotations

import httpx
from test_server_support import API_KEY, ServerThread, make_settings, wait_for

from serving.server.app import create_app
from serving.server.state import Phase


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
            r = httpx.post(server.url + "/v1/completions", timeout=5, headers={"Authorization": f"Bearer {API_KEY}"},
                           json={"model": state.settings.model_name, "prompt": "x"})
            assert r.status_code == 503 and r.json()["error"]["type"] == "service_unavailable"
        except httpx.TransportError:
            assert not server.thread.is_alive() or state.phase is Phase.FAILED
        assert wait_for(lambda: not server.thread.is_alive(), timeout=30)  # it asked uvicorn to exit
    assert state.phase is Phase.FAILED
    assert "broken.gguf" in state.load_error
