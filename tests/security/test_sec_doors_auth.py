"""One key check, throttled everywhere: wrong keys on pages, the chart API, /metrics, ingest or
the login form count toward one limit per client address; past it every check from that address
is a 429, the right key included (no oracle); `X-Forwarded-For` counts only from a trusted proxy,
and the shipped manifest trusts only the gateway's address. SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import ipaddress
from pathlib import Path

import httpx
import pytest
import yaml
from sec_fakes import API_KEY

from sidecar.app import create_app
from storage.db import session_factory

LIMIT = 5
ROUTES = [
    ("GET", "/reports"),
    ("GET", "/api/v1/series?kind=drift"),
    ("GET", "/metrics"),
    ("GET", "/"),
    ("POST", "/v1/ingest"),
]
MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "vigil.yaml"


@pytest.fixture
def app(migrated_db, make_settings):
    settings = make_settings(
        migrated_db,
        api_keys=[API_KEY],
        auth_failures_per_minute=LIMIT,
        trusted_proxies=["192.0.2.1/32"],
    )
    return create_app(settings, session_factory(migrated_db))


def _calls(app, calls, peer="198.51.100.7"):
    async def go():
        transport = httpx.ASGITransport(app=app, client=(peer, 4000))
        async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as client:
            out = []
            for method, path, headers in calls:
                body = (
                    {"content": b'{"samples": []}'}
                    if method == "POST" and path == "/v1/ingest"
                    else {}
                )
                if path == "/login":
                    body = {"data": {"key": headers.pop("x-login-key"), "next": "/reports"}}
                out.append(await client.request(method, path, headers=headers, **body))
            return out

    return asyncio.run(go())


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_wrong_keys_on_any_route_then_the_right_one_is_429(app, method, path):
    """Was: bearer keys on page and chart routes were never throttled (25 wrong keys, then the
    right one: 200)."""
    wrong = [(method, path, _bearer(f"wrong-key-{i:04d}-xxxxxxxx")) for i in range(LIMIT + 20)]
    answers = _calls(app, [*wrong, (method, path, _bearer(API_KEY))])
    assert [r.status_code for r in answers[:LIMIT]] == [401] * LIMIT
    assert {r.status_code for r in answers[LIMIT:]} == {429}
    assert int(answers[-1].headers["retry-after"]) >= 1


def test_one_counter_for_every_route_and_the_login_form(app):
    """Failures spread over routes add up; once throttled, nothing tells the right key from a
    wrong one anywhere (was: a wrong key stayed an oracle on the pages while ingest said 429)."""
    spread = [(m, p, _bearer(f"wrong-{i}-xxxxxxxxxxxx")) for i, (m, p) in enumerate(ROUTES)][:LIMIT]
    probes = [(m, p, _bearer(k)) for m, p in ROUTES for k in (API_KEY, "wrong-key-yyyyyyyyyyyy")]
    logins = [("POST", "/login", {"x-login-key": k}) for k in (API_KEY, "wrong-key-zzzzzzzzzz")]
    answers = _calls(app, [*spread, *probes, *logins])
    assert [r.status_code for r in answers[LIMIT:]] == [429] * (len(probes) + len(logins))
    bodies = {(r.request.url.path, r.text) for r in answers[LIMIT : LIMIT + len(probes)]}
    assert len(bodies) == len(ROUTES)  # per route, the right and the wrong key read the same
    # another address is not affected
    assert (
        _calls(app, [("GET", "/reports", _bearer(API_KEY))], peer="198.51.100.8")[0].status_code
        == 200
    )


def test_forwarded_for_counts_only_from_a_trusted_proxy(app):
    """Was: the manifest trusted 10.0.0.0/8, so any pod rotating X-Forwarded-For was never
    throttled. From an untrusted peer the header is ignored: the peer is the client."""
    rotating = [
        (
            "GET",
            "/reports",
            {**_bearer(f"wrong-{i}-xxxxxxxxxxxx"), "X-Forwarded-For": f"203.0.113.{i}"},
        )
        for i in range(LIMIT + 3)
    ]
    answers = _calls(app, [*rotating, ("GET", "/reports", _bearer(API_KEY))], peer="10.1.2.3")
    assert answers[-1].status_code == 429
    # behind the trusted gateway, each forwarded client is counted on its own
    behind = [
        (
            "GET",
            "/reports",
            {**_bearer(f"wrong-{i}-xxxxxxxxxxxx"), "X-Forwarded-For": "203.0.113.50"},
        )
        for i in range(LIMIT)
    ]
    ok = ("GET", "/reports", {**_bearer(API_KEY), "X-Forwarded-For": "203.0.113.51"})
    blocked = ("GET", "/reports", {**_bearer(API_KEY), "X-Forwarded-For": "203.0.113.50"})
    answers = _calls(app, [*behind, ok, blocked], peer="192.0.2.1")
    assert (answers[-2].status_code, answers[-1].status_code) == (200, 429)


def test_the_manifest_trusts_only_single_gateway_addresses():
    env = {}
    for doc in yaml.safe_load_all(MANIFEST.read_text()):
        for container in (
            (doc or {}).get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
        ):
            env.update(
                {e["name"]: e.get("value") for e in container.get("env", []) if "value" in e}
            )
    import json

    proxies = json.loads(env["VIGIL_TRUSTED_PROXIES"])
    assert proxies, "the manifest should name the gateway"
    for entry in proxies:
        network = ipaddress.ip_network(entry, strict=False)
        assert network.num_addresses == 1, f"{entry} trusts {network.num_addresses} addresses"
