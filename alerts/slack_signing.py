"""Verifying Slack's interactive callbacks (a person pressed a button in a Vigil message):
Slack signs each request with the app's signing secret, `X-Slack-Signature: v0=<hex>` over
`v0:{X-Slack-Request-Timestamp}:{raw body}` with HMAC-SHA256. A request older or newer than
five minutes is refused (a captured one cannot be replayed later)."""

from __future__ import annotations

import hashlib
import hmac

TOLERANCE_S = 300
VERSION = "v0"


class SlackSignatureError(ValueError):
    """Why a callback is not Slack's: the message names what is wrong, never the secret."""


def slack_signature(secret: str, timestamp: str, body: bytes) -> str:
    base = f"{VERSION}:{timestamp}:".encode() + body
    return f"{VERSION}=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def verify_slack(
    secret: str, timestamp: str | None, signature: str | None, body: bytes, now: float
) -> None:
    if not timestamp or not signature:
        raise SlackSignatureError("missing X-Slack-Request-Timestamp or X-Slack-Signature")
    try:
        sent = int(timestamp)
    except ValueError:
        raise SlackSignatureError("X-Slack-Request-Timestamp is not unix seconds") from None
    if abs(now - sent) > TOLERANCE_S:
        raise SlackSignatureError(f"the request is more than {TOLERANCE_S} s old or ahead")
    if not hmac.compare_digest(slack_signature(secret, timestamp, body), signature):
        raise SlackSignatureError("the signature does not match the signing secret")
