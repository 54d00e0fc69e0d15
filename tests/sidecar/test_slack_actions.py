"""Acknowledge from Slack (SQLite and PostgreSQL): the trigger's Slack message carries an
Acknowledge button; a callback signed with the signing secret (signature computed here with
hmac, as Slack does) acknowledges the incident as `slack:<user>` over a real HTTP server; a wrong
signature, a stale timestamp, an oversized body or a missing secret are refused before anything
is parsed."""

from __future__ import annotations

import time

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st
from sidecar_servers import UvicornThread
from slack_callbacks import SECRET, press, seed, signed

from alerts.incident_payloads import build_incident_payload
from alerts.rules_file import Target
from alerts.slack_signing import SlackSignatureError, verify_slack
from sidecar.app import create_app
from storage.db import session_factory
from storage.models import Alert, Incident


def test_the_trigger_carries_an_acknowledge_button():
    incident = Incident(id=7, status="open", severity="high", kind="prompt", headline="h",
                        group_key="drift", cause={})  # fmt: skip
    alert = Alert(id=3, rule="token_psi", kind="prompt", severity="high", segment="*",
                  status="open", summary="s", evidence={}, occurrences=1)  # fmt: skip
    body = build_incident_payload(incident, [alert], Target("chat", "http://x", "slack"),
                                  event="trigger", public_url="http://v")  # fmt: skip
    buttons = [e for b in body["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert {"action_id": "vigil_acknowledge", "value": "7"}.items() <= next(
        b for b in buttons if b.get("action_id") == "vigil_acknowledge"
    ).items()


def test_a_signed_press_acknowledges_and_forgeries_are_refused(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    incident_id = seed(factory)
    app = create_app(make_settings(migrated_db, slack_signing_secret=SECRET), factory)
    with UvicornThread(app) as server:
        url = f"{server.url}/slack/actions"
        body = press(incident_id)
        forged = httpx.post(url, content=body, headers=signed(body, secret="wrong" * 6))
        stale = httpx.post(url, content=body, headers=signed(body, at=time.time() - 600))
        big = b"payload=" + b"x" * (70 * 1024)
        too_big = httpx.post(url, content=big, headers=signed(big))
        other = press(incident_id, action="vigil_resolve")
        unknown = httpx.post(url, content=other, headers=signed(other))
        assert (forged.status_code, stale.status_code) == (401, 401), forged.text
        assert "signature does not match" in forged.text and "300 s" in stale.text
        assert too_big.status_code == 413 and unknown.status_code == 400
        with factory() as s:
            assert s.get(Incident, incident_id).acknowledged_at is None  # nothing got through
        ok = httpx.post(url, content=body, headers=signed(body))
        assert ok.status_code == 200 and "acknowledged by alice" in ok.json()["text"]
    with factory() as s:
        assert s.get(Incident, incident_id).acknowledged_by == "slack:alice"
    off = create_app(make_settings(migrated_db), factory)
    with UvicornThread(off) as server:
        assert httpx.post(f"{server.url}/slack/actions", content=body,
                          headers=signed(body)).status_code == 404  # fmt: skip


@settings(max_examples=100, deadline=None, derandomize=True)
@given(body=st.binary(max_size=200), skew=st.integers(-1000, 1000), flip=st.integers(0, 63))
def test_verify_against_an_oracle(body, skew, flip):
    now = 1_750_000_000
    headers = signed(body, at=now + skew)
    stamp, good = headers["X-Slack-Request-Timestamp"], headers["X-Slack-Signature"]
    bad = good[: 3 + flip] + ("0" if good[3 + flip] != "0" else "1") + good[4 + flip :]
    for signature, ok in ((good, abs(skew) <= 300), (bad, False)):
        try:
            verify_slack(SECRET, stamp, signature, body, now)
            accepted = True
        except SlackSignatureError:
            accepted = False
        assert accepted == ok
