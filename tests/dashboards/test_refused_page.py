"""A browser's form action that is refused gets a page that says which key it needs and who
the request came as (not JSON); an action taken with a named key is recorded under the name."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sidecar_servers import API_KEY

from sidecar.app import create_app
from storage.db import session_factory
from storage.models import AlertAction
from vigil.devtools.seed_history import seed_history

ADMIN = "admin-key-0123456789abcdef"
VIEW = {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture
def world(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    with factory() as session:
        seeded = seed_history(session, hours=2)
    settings = make_settings(migrated_db, admin_keys=[f"alice:{ADMIN}"])
    return seeded, TestClient(create_app(settings, factory)), factory


def test_a_viewer_pressing_acknowledge_is_told_which_key_it_needs(world):
    data, client, factory = world
    r = client.post(
        f"/alerts/{data.alert_id}/acknowledge",
        data={"note": "mine"},
        headers=VIEW,
        follow_redirects=False,
    )
    assert r.status_code == 403 and r.headers["content-type"].startswith("text/html")
    lead = r.text.split('id="refused">')[1].split("</p>")[0]
    assert (
        lead.startswith(f"Acknowledging alert {data.alert_id} needs an admin key")
        and "VIGIL_ADMIN_KEYS" in lead
    )
    assert "(viewer)" in r.text and f'href="/alerts/{data.alert_id}"' in r.text
    # the API keeps its JSON answer
    api = client.post(f"/api/v1/alerts/{data.alert_id}/acknowledge", json={}, headers=VIEW)
    assert api.status_code == 403 and api.json()["detail"]
    r = client.post("/baselines/activate", data={"id": "1"}, headers=VIEW)
    assert r.status_code == 403 and "needs an admin key" in r.text and "<html" in r.text.lower()
    with factory() as s:
        assert s.query(AlertAction).count() == 0


def test_a_named_admin_key_is_recorded_by_name(world):
    data, client, factory = world
    admin = {"Authorization": f"Bearer {ADMIN}"}
    r = client.post(
        f"/alerts/{data.alert_id}/acknowledge",
        data={"note": "looking"},
        headers=admin,
        follow_redirects=False,
    )
    assert r.status_code == 303
    with factory() as s:
        assert [a.actor for a in s.query(AlertAction)] == ["key:alice"]
    page = client.get(f"/alerts/{data.alert_id}", headers=VIEW).text
    assert "key:alice" in page.split('id="timeline"')[1].split("</table>")[0]
    # a form action the alert's state refuses is a page too, with the reason
    client.post(f"/api/v1/alerts/{data.alert_id}/resolve", json={}, headers=admin)
    r = client.post(f"/alerts/{data.alert_id}/snooze", data={"hours": "4"}, headers=admin)
    assert r.status_code == 409 and "Snoozing alert" in r.text and "was refused" in r.text


def test_buttons_pressed_in_a_browser_act_or_say_why_not(migrated_db, make_settings):
    """In Chromium (its form posts carry `Origin: null` under the pages' no-referrer policy): an
    admin's Acknowledge is recorded under the key's name; a viewer's gets the refusal page."""
    from headless import browser_missing, served_in_browser

    if browser_missing():
        pytest.skip(browser_missing())
    factory = session_factory(migrated_db)
    with factory() as session:
        data = seed_history(session, hours=1)
    settings = make_settings(migrated_db, admin_keys=[f"alice:{ADMIN}"])
    texts = {}
    with served_in_browser(create_app(settings, factory)) as (url, browser):
        for who, key in (("viewer", API_KEY), ("admin", ADMIN)):
            context = browser.new_context(extra_http_headers={"Authorization": f"Bearer {key}"})
            page = context.new_page()
            page.goto(f"{url}/alerts/{data.alert_id}")
            page.fill("form[action$='/acknowledge'] input[name=note]", f"{who} looking")
            page.click("form[action$='/acknowledge'] button")
            page.wait_for_load_state("load")
            texts[who] = page.inner_text("body")
            context.close()
    assert f"Acknowledging alert {data.alert_id} needs an admin key" in texts["viewer"]
    assert "admin looking" in texts["admin"] and "key:alice" in texts["admin"]
    with factory() as s:
        assert [(a.actor, a.note) for a in s.query(AlertAction)] == [("key:alice", "admin looking")]
