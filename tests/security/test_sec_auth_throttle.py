"""Key guessing is throttled per client address, on the engine's API, the sidecar's API and the
page login alike: past the limit every key check from that address is a 429 with Retry-After,
a right key included (a guess must not be told apart from a refusal); other addresses are not
affected, and behind a trusted proxy each forwarded address counts on its own."""

from __future__ import annotations

import asyncio

import httpx
from asgi_calls import call
from sec_fakes import API_KEY
from test_sec_engine_guard import engine_app

from sidecar.app import create_app
from storage.db import session_factory

JSON = ("content-type", "application/json")
GOOD = ("authorization", f"Bearer {API_KEY}")
BAD = ("authorization", "Bearer not-the-key-at-all")


def test_engine_api_refuses_an_address_after_its_failures():
    app = engine_app(auth_failures_per_minute=3)

    def models(auth, client=("198.51.100.1", 5000)):
        return asyncio.run(call(app, "GET", "/v1/models", headers=[auth], client=client))

    assert [models(BAD).status for _ in range(3)] == [401] * 3
    refused = models(GOOD)
    assert refused.status == 429 and 1 <= int(refused.headers[b"retry-after"]) <= 60
    assert refused.json()["error"]["code"] == "too_many_auth_failures"
    assert models(GOOD, client=("198.51.100.2", 5000)).status == 200
    # a request without a key is no guess: it keeps its 401 telling the caller to send one
    fresh = ("198.51.100.3", 5000)
    assert {
        asyncio.run(call(app, "GET", "/v1/models", client=fresh)).status for _ in range(10)
    } == {401}
    assert models(GOOD, client=fresh).status == 200
    assert asyncio.run(call(app, "GET", "/health", client=("198.51.100.1", 5000))).status == 200


def test_engine_api_without_a_limit_answers_every_guess():
    app = engine_app(auth_failures_per_minute=0)
    statuses = {
        asyncio.run(call(app, "GET", "/v1/models", headers=[BAD])).status for _ in range(30)
    }
    assert statuses == {401}


def test_sidecar_login_and_api_share_one_count(migrated_db, make_settings):
    settings = make_settings(
        migrated_db, api_keys=[API_KEY], trusted_proxies=["10.0.0.0/8"], auth_failures_per_minute=3
    )
    app = create_app(settings, session_factory(migrated_db))

    async def flow():
        def client(peer):
            return httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app, client=(peer, 4000)),
                base_url="http://sidecar",
            )

        async with client("203.0.113.5") as c:
            for _ in range(2):
                assert (
                    await c.post("/login", data={"key": "wrong-key-guess", "next": "/alerts"})
                ).status_code == 401
            assert (await c.get("/v1/ingest", headers=dict([BAD]))).status_code == 401  # the third
            login = await c.post("/login", data={"key": API_KEY, "next": "/alerts"})
            assert (
                login.status_code == 429
                and "retry-after" in login.headers
                and "vigil_session" not in login.cookies
            )
            assert (await c.get("/v1/ingest", headers=dict([GOOD]))).status_code == 429
        async with client("203.0.113.6") as c:
            assert (
                await c.post("/login", data={"key": API_KEY, "next": "/alerts"})
            ).status_code == 303
        # behind the trusted proxy each forwarded address has its own count
        async with client("10.0.0.7") as c:
            for _ in range(3):
                bad = await c.post(
                    "/login",
                    data={"key": "wrong-key-guess"},
                    headers={"x-forwarded-for": "192.0.2.1"},
                )
                assert bad.status_code == 401
            assert (
                await c.post(
                    "/login", data={"key": API_KEY}, headers={"x-forwarded-for": "192.0.2.1"}
                )
            ).status_code == 429
            assert (
                await c.post(
                    "/login", data={"key": API_KEY}, headers={"x-forwarded-for": "192.0.2.2"}
                )
            ).status_code == 303

    asyncio.run(flow())
