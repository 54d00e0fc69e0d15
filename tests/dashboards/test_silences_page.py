"""Silences and "this was expected" over HTTP (SQLite and PostgreSQL): the API creates, lists
and expires silences with an admin key, refuses a viewer and bad bodies with a message naming
the field; the incident page shows the silence and marks the incident expected; and in headless
Chromium an admin adds a silence from the page and marks an incident expected from its page."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from headless import needs_browser, served_in_browser, shot
from seed_incident import seed_incident
from sidecar_servers import API_KEY

from sidecar.app import create_app
from storage.db import session_factory
from storage.models import Incident, Silence
from vigil.devtools.seed_history import seed_history

ADMIN = "admin-key-0123456789abcdef"
VIEW = {"Authorization": f"Bearer {API_KEY}"}
ADMIN_AUTH = {"Authorization": f"Bearer {ADMIN}"}


@pytest.fixture
def world(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    with factory() as s:
        data = seed_history(s, hours=2, samples_per_hour=10)
        incident_id = seed_incident(s, data)
    app = create_app(make_settings(migrated_db, admin_keys=[ADMIN]), factory)
    return app, factory, incident_id


def test_silence_api_and_the_incident_page(world):
    app, factory, incident_id = world
    client = TestClient(app)
    body = {
        "matchers": {"segment": "web", "rule": "prompt_*"},
        "hours": 4,
        "comment": "onboarding",
    }
    assert client.post("/api/v1/silences", json=body, headers=VIEW).status_code == 403
    made = client.post("/api/v1/silences", json=body, headers=ADMIN_AUTH)
    assert made.status_code == 201 and made.json()["active"] and made.json()["created_by"]
    bad = client.post("/api/v1/silences", json={**body, "matchers": {"colour": "x"}},
                      headers=ADMIN_AUTH)  # fmt: skip
    assert bad.status_code == 422 and "matchers.colour" in bad.text
    assert client.post("/api/v1/silences", json={"matchers": {"tenant": "x"}, "comment": "c"},
                       headers=ADMIN_AUTH).status_code == 422  # fmt: skip
    listed = client.get("/api/v1/silences", headers=VIEW).json()["silences"]
    assert [s["id"] for s in listed] == [made.json()["id"]]
    listed = client.get("/api/v1/incidents", headers=VIEW).json()["incidents"][0]
    assert listed["silenced_by"] == made.json()["id"] and "silenced by #" in listed["on_call"]
    page = client.get(f"/incidents/{incident_id}", headers=VIEW).text
    assert f"silence #{made.json()['id']}" in page  # its one alert (prompt_psi, web) matches
    expired = client.post(f"/api/v1/silences/{made.json()['id']}/expire", headers=ADMIN_AUTH)
    assert expired.status_code == 200 and not expired.json()["active"]
    assert "silence #" not in client.get(f"/incidents/{incident_id}", headers=VIEW).text
    marked = client.post(f"/api/v1/incidents/{incident_id}/expected", json={"note": "planned"},
                         headers=ADMIN_AUTH)  # fmt: skip
    assert marked.status_code == 200 and marked.json()["expected_by"]
    again = client.post(f"/api/v1/incidents/{incident_id}/expected", headers=ADMIN_AUTH)
    assert again.status_code == 409
    listing = client.get("/api/v1/incidents?state=expected", headers=VIEW).json()["incidents"]
    assert [i["id"] for i in listing] == [incident_id]
    assert "re-baselining" in listing[0]["on_call"]


@needs_browser
def test_silence_and_expected_in_a_browser(world, migrated_db):
    app, factory, incident_id = world
    with served_in_browser(app) as (url, browser):
        context = browser.new_context(extra_http_headers=ADMIN_AUTH)
        page = context.new_page()
        page.goto(f"{url}/silences")
        page.fill("#new-silence input[name=tenant]", "newco")
        page.fill("#new-silence input[name=comment]", "newco onboarding this week")
        page.click("#new-silence button")
        page.wait_for_load_state("load")
        silences_text = page.inner_text("#silences")
        page.screenshot(path=str(shot("silences", migrated_db)), full_page=True)
        page.goto(f"{url}/incidents/{incident_id}")
        page.fill("#expected-form input[name=note]", "newco signed on Monday")
        page.click("#expected-form button")
        page.wait_for_load_state("load")
        expected_text = page.inner_text("#expected")
        status = page.inner_text(".tiles")
        page.screenshot(path=str(shot("incident-expected", migrated_db)), full_page=True)
        context.close()
    assert "tenant = newco" in silences_text and "newco onboarding this week" in silences_text
    assert "Marked expected by" in expected_text and "newco signed on Monday" in expected_text
    assert "expected" in status and "re-baselining" in status
    with factory() as s:
        assert s.query(Silence).count() == 1
        assert s.get(Incident, incident_id).expected_note == "newco signed on Monday"
