"""The keyed pseudonym of a user or session id (often an e-mail address): stable per secret,
not reversible without it, so it can label a segment without putting the address in alerts.
One function for the engine's OpenAI `user` and the ids the sidecar reads from spans."""

from __future__ import annotations

import hashlib
import hmac


def hash_user(user: str | None, secret: str) -> str | None:
    if not user:
        return None
    key = hmac.new(secret.encode(), b"vigil-user-pseudonym", hashlib.sha256).digest()
    return "u-" + hmac.new(key, user.encode("utf-8", "replace"), hashlib.sha256).hexdigest()[:16]
