"""In headless Chromium: after a signed Slack Acknowledge callback (signed with hmac, as Slack
does), the incident's page says it was acknowledged by `slack:<user>`."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from datetime import UTC, datetime
from urllib.parse import urlencode

import httpx
from headless import needs_browser, served_in_browser, visit

from sidecar.app import create_app
from storage.db import session_factory
from storage.models import Alert, Incident

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"

pytestmark = needs_browser


def slack_press(incident_id: int, user: str) -> tuple[bytes, dict[str, str]]:
    """The form body Slack posts when `user` presses Acknowledge, and its signed headers."""
    press = {"action_id": "vigil_acknowledge", "value": str(incident_id)}
    payload = {"type": "block_actions", "user": {"id": "U1", "username": user}, "actions": [press]}
    body = urlencode({"payload": json.dumps(payload)}).encode()
    stamp = str(int(time.time()))
    mac = hmac.new(SECRET.encode(), b"v0:" + stamp.encode() + b":" + body, hashlib.sha256)
    return body, {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": "v0=" + mac.hexdigest(),
                  "Content-Type": "application/x-www-form-urlencoded"}  # fmt: skip


def seed(factory) -> int:
    now = datetime.now(UTC)
    with factory() as s:
        incident = Incident(group_key="drift", status="open", severity="high", kind="prompt",
                            headline="New tenant newco", first_seen=now, last_seen=now,
                            notifications=1)  # fmt: skip
        s.add(incident)
        s.flush()
        s.add(Alert(dedupe_key="a|*", rule="token_psi", kind="prompt", severity="high",
                    segment="*", status="open", summary="s", first_seen=now, last_seen=now,
                    incident_id=incident.id))  # fmt: skip
        s.commit()
        return incident.id


def test_a_slack_acknowledge_shows_on_the_incident_page(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    incident_id = seed(factory)
    app = create_app(make_settings(migrated_db, slack_signing_secret=SECRET), factory)
    with served_in_browser(app) as (url, browser):
        before = visit(
            browser, f"{url}/incidents/{incident_id}", None, lambda p: p.inner_text("body")
        )
        body, headers = slack_press(incident_id, "alice")
        r = httpx.post(f"{url}/slack/actions", content=body, headers=headers)
        assert r.status_code == 200, r.text
        after = visit(
            browser, f"{url}/incidents/{incident_id}", None, lambda p: p.inner_text("body")
        )
    assert "acknowledged by" not in before["seen"]
    assert "acknowledged by slack:alice" in after["seen"], after["seen"][:2000]
    assert after["errors"] == []
