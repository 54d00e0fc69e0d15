"""A Slack Acknowledge callback as Slack sends it (form body, signed with hmac over
`v0:<timestamp>:<body>`), and an open incident with one alert to press it on."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from datetime import UTC, datetime
from urllib.parse import urlencode

from storage.models import Alert, Incident

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


def signed(body: bytes, secret: str = SECRET, at: float | None = None) -> dict[str, str]:
    stamp = str(int(time.time() if at is None else at))
    mac = hmac.new(secret.encode(), b"v0:" + stamp.encode() + b":" + body, hashlib.sha256)
    return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": "v0=" + mac.hexdigest(),
            "Content-Type": "application/x-www-form-urlencoded"}  # fmt: skip


def press(incident_id: int, user: str = "alice", action: str = "vigil_acknowledge") -> bytes:
    payload = {"type": "block_actions", "user": {"id": "U1", "username": user},
               "actions": [{"action_id": action, "value": str(incident_id)}]}  # fmt: skip
    return urlencode({"payload": json.dumps(payload)}).encode()


def seed(factory) -> int:
    """An open high incident with one alert; returns its id."""
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
