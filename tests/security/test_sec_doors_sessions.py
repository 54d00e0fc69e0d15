"""Page sessions live on the server: logout ends the session (its old cookie is refused
afterwards, on this process and any other sharing the database), and a state-changing page
action from another site is refused whatever cookie it carries. SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from page_world import seed_alert
from sec_fakes import ADMIN_KEY, API_KEY
from sidecar_calls import log_in, page_client

from sidecar.app import create_app
from sidecar.page_auth import COOKIE
from storage.db import session_factory
from storage.models import Alert


@pytest.fixture
def world(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    alert_id = seed_alert(factory).alert_id
    settings = make_settings(
        migrated_db, api_keys=[API_KEY], admin_keys=[ADMIN_KEY], public_url="https://vigil.example"
    )

    def app():
        return create_app(settings, factory)

    return app, factory, alert_id


def _client(app) -> httpx.AsyncClient:
    return page_client(app, base_url="https://vigil.example")


def _status(factory, alert_id: int) -> str:
    with factory() as s:
        return s.get(Alert, alert_id).status


def test_logout_ends_the_session_and_its_copied_cookie(world):
    """Was: logout only asked the browser to drop the cookie; a copy of it kept working."""
    make_app, _, _ = world
    app, other_process = make_app(), make_app()

    async def flow():
        async with (
            _client(app) as browser,
            _client(app) as copy,
            _client(other_process) as elsewhere,
        ):
            cookie = await log_in(browser, API_KEY)
            second = await log_in(copy, API_KEY)  # another login of the same key
            for c in (copy, elsewhere):
                c.cookies.set(COOKIE, cookie)
            assert (await copy.get("/alerts")).status_code == 200
            assert (await elsewhere.get("/alerts")).status_code == 200  # a record any replica reads
            assert (await browser.post("/logout")).status_code == 303
            assert (await copy.get("/alerts")).status_code == 401
            assert (await elsewhere.get("/alerts")).status_code == 401
            copy.cookies.set(COOKIE, second)
            assert (await copy.get("/alerts")).status_code == 200  # only the ended session died

    asyncio.run(flow())


def test_a_signed_cookie_without_a_session_record_is_refused(world):
    """A cookie correctly signed with the secret but never issued (no row) opens nothing."""
    from sidecar.page_auth import sign_session
    from vigil.keys import KeyRing

    make_app, _, _ = world
    app = make_app()
    settings = app.state.settings
    forged = sign_session(
        KeyRing.from_settings(settings).lookup(ADMIN_KEY), settings.secret_key, 600
    )

    async def flow():
        async with _client(app) as c:
            c.cookies.set(COOKIE, forged)
            return (await c.get("/alerts")).status_code

    assert asyncio.run(flow()) == 401


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site", "Origin": "https://vigil.example"},
    ],
    ids=["origin", "null-origin", "fetch-site", "sibling-site"],
)
def test_a_cross_site_form_post_with_an_admin_cookie_is_refused(world, headers):
    """Was: an admin cookie plus `Origin: https://evil.example` acknowledged an alert."""
    make_app, factory, alert_id = world
    app = make_app()

    async def flow():
        async with _client(app) as c:
            await log_in(c, ADMIN_KEY)
            attack = await c.post(
                f"/alerts/{alert_id}/acknowledge", data={"note": "pwned"}, headers=headers
            )
            logout = await c.post("/logout", headers=headers)  # nor can another site log a user out
            return attack.status_code, logout.status_code, (await c.get("/alerts")).status_code

    assert asyncio.run(flow()) == (403, 403, 200)
    assert _status(factory, alert_id) == "open"


def test_same_site_actions_and_api_clients_still_work(world):
    make_app, factory, alert_id = world
    app = make_app()

    async def flow():
        async with _client(app) as c:
            await log_in(c, ADMIN_KEY)
            page = await c.post(
                f"/alerts/{alert_id}/acknowledge",
                data={"note": "on it"},
                headers={"Origin": "https://vigil.example", "Sec-Fetch-Site": "same-origin"},
            )
            assert page.status_code == 303
        async with _client(app) as api:  # a bearer-key client sends neither header
            resolved = await api.post(
                f"/api/v1/alerts/{alert_id}/resolve",
                json={"note": "fixed"},
                headers={"Authorization": f"Bearer {ADMIN_KEY}"},
            )
            assert resolved.status_code == 200

    asyncio.run(flow())
    assert _status(factory, alert_id) == "resolved"


def test_a_browsers_own_form_post_with_a_null_origin_works(world):
    """Was: Chromium sends `Origin: null` with `Sec-Fetch-Site: same-origin` on a form post from a
    page served with `Referrer-Policy: no-referrer`, and every page action was refused."""
    make_app, factory, alert_id = world
    app = make_app()

    async def flow():
        async with _client(app) as c:
            await log_in(c, ADMIN_KEY)
            r = await c.post(
                f"/alerts/{alert_id}/acknowledge",
                data={"note": "on it"},
                headers={"Origin": "null", "Sec-Fetch-Site": "same-origin"},
            )
            return r.status_code

    assert asyncio.run(flow()) == 303
    with factory() as s:
        assert s.get(Alert, alert_id).acknowledged_at is not None
