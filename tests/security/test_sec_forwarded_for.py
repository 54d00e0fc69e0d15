"""`X-Forwarded-For` from a loopback peer is only a header: each server, run by its production
uvicorn config, takes the client address from the socket, and only Vigil's own
`VIGIL_TRUSTED_PROXIES` check may replace it. (uvicorn's `proxy_headers`, on by default, used to
trust any 127.0.0.1 peer and rewrite the address before that check ran.)"""

from __future__ import annotations

import time

import httpx
import pytest
from fake_upstream import ListSink
from sec_fakes import API_KEY, MODEL
from sec_servers import engine_server, proxy_server, settings_for, sidecar_server

GATEWAY_NET = "10.0.0.0/8"  # the trusted gateway's network; the tests call from 127.0.0.1


def test_a_forged_forwarded_for_does_not_open_forward_auth_pages(migrated_db):
    """Was: 200 for /alerts with no key, as user `mallory`."""
    settings = settings_for(
        database_url=migrated_db,
        trusted_proxies=[GATEWAY_NET],
        forward_auth_header="X-Forwarded-User",
    )
    forged = {"X-Forwarded-For": "10.1.2.3", "X-Forwarded-User": "mallory"}
    with sidecar_server(settings) as url:
        refused = httpx.get(f"{url}/alerts", headers=forged)
        keyed = httpx.get(f"{url}/alerts", headers={"Authorization": f"Bearer {API_KEY}"})
    assert refused.status_code == 401, refused.text[:200]
    assert keyed.status_code == 200


def _wait_for(sink: ListSink, n: int) -> list[dict]:
    deadline = time.monotonic() + 10
    while len(sink.records) < n and time.monotonic() < deadline:
        time.sleep(0.02)
    return sink.records


def test_a_global_key_cannot_file_traffic_as_another_tenant_by_forging_the_hop():
    """Was: the sampled request was logged under tenant `victim`."""
    settings = settings_for(trusted_proxies=[GATEWAY_NET], sample_rate=1.0)
    sink = ListSink()
    headers = {
        "Authorization": f"Bearer {API_KEY}",
        "X-Forwarded-For": "10.9.9.9",
        "X-Vigil-Tenant": "victim",
        "X-Vigil-Segment": "victim-vip",
    }
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
    with engine_server(settings, writer=sink) as url:
        r = httpx.post(f"{url}/v1/chat/completions", json=body, headers=headers, timeout=30)
        assert r.status_code == 200, r.text
        [record] = _wait_for(sink, 1)
    assert record["tenant"] != "victim" and record["segment"] != "victim-vip", record


def _guess(url: str, path: str, forwarded_for: str) -> int:
    headers = {"Authorization": "Bearer wrong-key-0123456789", "X-Forwarded-For": forwarded_for}
    method = "GET" if path.endswith("models") else "POST"
    return httpx.request(method, url + path, headers=headers, json={}).status_code


@pytest.mark.parametrize(
    "server,path",
    [(sidecar_server, "/v1/ingest"), (engine_server, "/v1/models"), (proxy_server, "/v1/models")],
    ids=["sidecar", "engine", "proxy"],
)
def test_rotating_forwarded_for_does_not_escape_the_key_throttle(server, path):
    """Was: a new `X-Forwarded-For` per guess made each guess a new client; never a 429."""
    settings = settings_for(
        auth_failures_per_minute=3, proxy_upstream_url="http://127.0.0.1:9", proxy_workers=1
    )
    with server(settings) as url:
        answers = [_guess(url, path, f"198.51.100.{i}") for i in range(1, 7)]
    assert answers[:3] == [401, 401, 401] and set(answers[3:]) == {429}, answers


def test_every_server_vigil_runs_is_configured_through_uvicorn_config():
    """A uvicorn.Config built anywhere else would bring uvicorn's proxy headers back."""
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    builders = [
        str(path.relative_to(root))
        for package in ("serving", "sidecar", "vigil", "dashboards", "storage", "alerts")
        for path in (root / package).rglob("*.py")
        if "uvicorn.Config(" in path.read_text() or "uvicorn.run(" in path.read_text()
    ]
    assert builders == ["vigil/http_server.py"], builders
