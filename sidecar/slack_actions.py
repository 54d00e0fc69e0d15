"""`POST /slack/actions`: Slack's interactive callback for the buttons in Vigil's messages.
Acknowledge on a trigger message acknowledges the incident as `slack:<user>`, exactly as the
page's button does (alerts.incident_lifecycle). Not behind a Vigil key (Slack cannot send one):
the body is bounded before it is read (sidecar.limits), and nothing is parsed before its
signature and timestamp check out against `VIGIL_SLACK_SIGNING_SECRET`
(alerts.slack_signing). Without that setting the route answers 404."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, HTTPException, Request
from sqlalchemy.orm import Session, sessionmaker

from alerts import incident_lifecycle
from alerts.lifecycle import LifecycleError
from alerts.slack_signing import SlackSignatureError, verify_slack
from vigil.config import Settings

SLACK_PATH = "/slack/actions"
ACK_ACTION = "vigil_acknowledge"


def _action(body: bytes) -> tuple[str, int, str]:
    """(action id, incident id, who) from Slack's form-encoded `payload`, or a 400 saying why."""
    fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=4)
    try:
        payload = json.loads(fields["payload"][0])
        action = payload["actions"][0]
        user = payload.get("user") or {}
        who = str(user.get("username") or user.get("name") or user.get("id") or "unknown")
        return str(action["action_id"]), int(action["value"]), who[:100]
    except (KeyError, IndexError, TypeError, ValueError):
        raise HTTPException(400, "not a Slack block_actions payload with a Vigil button") from None


def build_slack_router(settings: Settings, session_factory: sessionmaker[Session]) -> APIRouter:
    router = APIRouter()

    @router.post(SLACK_PATH)
    async def slack_action(request: Request) -> dict[str, Any]:
        secret = settings.slack_signing_secret
        if not secret:
            raise HTTPException(404, "Slack actions are off: VIGIL_SLACK_SIGNING_SECRET is unset")
        body = await request.body()
        try:
            verify_slack(secret, request.headers.get("x-slack-request-timestamp"),
                         request.headers.get("x-slack-signature"), body, time.time())  # fmt: skip
        except SlackSignatureError as exc:
            raise HTTPException(401, f"not a Slack request: {exc}") from None
        action, incident_id, who = _action(body)
        if action != ACK_ACTION:
            raise HTTPException(400, f"unknown action {action[:64]!r}")
        with session_factory() as session:
            try:
                incident_lifecycle.acknowledge(
                    session, incident_id, actor=f"slack:{who}", now=datetime.now(UTC),
                    note="from Slack",
                )  # fmt: skip
                session.commit()
            except LookupError:
                return {"replace_original": False, "text": f"Incident {incident_id} is unknown."}
            except LifecycleError as exc:
                return {"replace_original": False, "text": str(exc)}
        return {"replace_original": False,
                "text": f"Incident {incident_id} acknowledged by {who}."}  # fmt: skip

    return router
