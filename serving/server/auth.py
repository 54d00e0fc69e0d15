"""API keys: `Authorization: Bearer <key>` checked against `Settings.api_keys` (no keys: open)."""

from __future__ import annotations

import hmac

from fastapi import Request

from serving.server.errors import APIError


def check_api_key(request: Request, keys: list[str]) -> None:
    if not keys:
        return
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() == "bearer" and token:
        presented = token.encode()
        # compare against every key so timing does not reveal which one nearly matched
        matches = [hmac.compare_digest(presented, key.encode()) for key in keys]
        if any(matches):
            return
        raise APIError("Incorrect API key provided.", status=401, code="invalid_api_key")
    raise APIError("You didn't provide an API key. Send it as `Authorization: Bearer <key>`.",
                   status=401, code="missing_api_key")
