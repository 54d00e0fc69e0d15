"""In headless Chromium: after a signed Slack Acknowledge callback (signed with hmac, as Slack
does), the incident's page says it was acknowledged by `slack:<user>`."""

from __future__ import annotations

import httpx
from headless import needs_browser, served_in_browser, visit
from slack_callbacks import SECRET, press, seed, signed

from sidecar.app import create_app
from storage.db import session_factory

pytestmark = needs_browser


def test_a_slack_acknowledge_shows_on_the_incident_page(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    incident_id = seed(factory)
    app = create_app(make_settings(migrated_db, slack_signing_secret=SECRET), factory)
    with served_in_browser(app) as (url, browser):
        before = visit(
            browser, f"{url}/incidents/{incident_id}", None, lambda p: p.inner_text("body")
        )
        body = press(incident_id, "alice")
        headers = signed(body)
        r = httpx.post(f"{url}/slack/actions", content=body, headers=headers)
        assert r.status_code == 200, r.text
        after = visit(
            browser, f"{url}/incidents/{incident_id}", None, lambda p: p.inner_text("body")
        )
    assert "acknowledged by" not in before["seen"]
    assert "acknowledged by slack:alice" in after["seen"], after["seen"][:2000]
    assert after["errors"] == []
