"""The sidecar's pages need a caller: bearer key, a signed session cookie from the login page,
or a forward-auth header from a trusted proxy. Webhook targets show as scheme + host only.
Runs on SQLite and PostgreSQL."""

from __future__ import annotations

import httpx
import pytest
from page_world import seed_alert
from sec_fakes import ADMIN_KEY, API_KEY, TENANT_KEY
from sidecar_calls import page_client

from sidecar.app import create_app
from sidecar.page_auth import COOKIE, sign_session, verify_session
from storage.db import session_factory
from vigil.keys import KeyRing

SLACK = "https://hooks.slack.com/services/T000/B000/XXXXSECRETXXXX"
PAGES = ["/reports", "/reports/{run}", "/alerts", "/alerts/{alert}"]


@pytest.fixture
def world(migrated_db, make_settings, tmp_path):
    factory = session_factory(migrated_db)
    report = tmp_path / "r.html"
    report.write_text("<html>report</html>")
    seeded = seed_alert(
        factory,
        report_path=report,
        dead_delivery={"target": SLACK, "last_error": f"POST {SLACK} failed: 500 upstream said no"},
    )
    ids = {"run": seeded.run_id, "alert": seeded.alert_id}
    settings = make_settings(
        migrated_db,
        api_keys=[API_KEY],
        tenant_keys={TENANT_KEY: "acme"},
        admin_keys=[ADMIN_KEY],
        trusted_proxies=["10.0.0.0/8"],
        forward_auth_header="X-Forwarded-User",
    )
    app = create_app(settings, factory)
    return app, settings, [p.format(**ids) for p in PAGES]


async def _get_all(app, paths, peer="127.0.0.1", **kw):
    async with page_client(app, peer=peer, **kw) as c:
        return [await c.get(p) for p in paths]


def get_all(app, paths, **kw):
    import asyncio

    return asyncio.run(_get_all(app, paths, **kw))


def test_pages_without_credentials_are_refused(world):
    """Was: /reports, /reports/1 and /alerts answered 200 with no key."""
    app, _, paths = world
    for r in get_all(app, paths):
        assert r.status_code == 401, (r.url, r.status_code)
    for r in get_all(app, paths, headers={"accept": "text/html"}):
        assert r.status_code == 303 and r.headers["location"].startswith("/login?next=/")
    for r in get_all(app, paths, headers={"authorization": "Bearer wrong-key-0123456789"}):
        assert r.status_code == 401


def test_keys_open_pages_but_tenant_keys_do_not(world):
    app, _, paths = world
    for key in (API_KEY, ADMIN_KEY):
        assert [
            r.status_code for r in get_all(app, paths, headers={"authorization": f"Bearer {key}"})
        ] == [200] * 4
    tenant = get_all(app, paths, headers={"authorization": f"Bearer {TENANT_KEY}"})
    assert {r.status_code for r in tenant} == {403}


def test_targets_show_scheme_and_host_only(world):
    app, _, paths = world
    pages = get_all(app, paths, headers={"authorization": f"Bearer {API_KEY}"})
    for page in pages[2:]:
        assert "XXXXSECRETXXXX" not in page.text and "/services/" not in page.text
        assert "https://hooks.slack.com" in page.text


def test_login_sets_a_hardened_session_cookie(world):
    import asyncio

    app, settings, paths = world

    async def flow():
        async with page_client(app) as c:
            assert (await c.get("/login")).status_code == 200
            bad = await c.post("/login", data={"key": "nope", "next": "/alerts"})
            assert bad.status_code == 401 and COOKIE not in bad.cookies
            refused = await c.post("/login", data={"key": TENANT_KEY, "next": "/alerts"})
            assert refused.status_code == 401
            ok = await c.post("/login", data={"key": API_KEY, "next": "//evil.example/x"})
            assert (
                ok.status_code == 303 and ok.headers["location"] == "/reports"
            )  # no open redirect
            cookie = ok.headers["set-cookie"].lower()
            assert (
                "httponly" in cookie
                and "samesite=strict" in cookie
                and API_KEY.lower() not in cookie
            )
            assert [(await c.get(p)).status_code for p in paths] == [200] * 4
            token = c.cookies[COOKIE]
            c.cookies.set(
                COOKIE, token[:-1] + ("a" if token[-1] != "a" else "b")
            )  # tampered signature
            assert (await c.get("/alerts")).status_code == 401
            logout = await c.post("/logout")
            assert logout.status_code == 303

    asyncio.run(flow())


def test_sessions_expire_and_die_with_their_key(world):
    _, settings, _ = world
    ring = KeyRing.from_settings(settings)
    principal = ring.lookup(API_KEY)
    token = sign_session(principal, settings.secret_key, ttl_s=60, now=1000.0)
    assert verify_session(token, settings.secret_key, ring, now=1030.0) is not None
    assert verify_session(token, settings.secret_key, ring, now=1061.0) is None  # expired
    assert verify_session(token, "another-secret-0123456789", ring, now=1030.0) is None
    assert (
        verify_session(token, settings.secret_key, KeyRing([ADMIN_KEY]), now=1030.0) is None
    )  # key removed


def test_forward_auth_only_from_a_trusted_proxy(world):
    app, _, paths = world
    header = {"x-forwarded-user": "alice"}
    assert {r.status_code for r in get_all(app, paths, peer="10.1.2.3", headers=header)} == {200}
    assert {r.status_code for r in get_all(app, paths, peer="192.168.1.9", headers=header)} == {401}


def test_health_names_no_internal_error(make_settings):
    """Was: a failing database check put the driver's error text (host, port, user) in /health."""
    import asyncio
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = f"postgresql+psycopg://vigil-db-user@127.0.0.1:{port}/test"  # nobody listens there
    app = create_app(make_settings(down), session_factory(down))

    async def get():
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://s"
        ) as c:
            return await c.get("/health")

    r = asyncio.run(get())
    assert r.status_code == 503 and r.json()["database"] is False
    assert "vigil-db-user" not in r.text and str(port) not in r.text and "error" not in r.json()
