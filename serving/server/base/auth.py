"""Who is calling: the `Principal` the request guard resolved from `Authorization: Bearer <key>`
(global, tenant-bound or admin key; no keys configured: open), and the segment identity a
request may claim given that principal and the address it came from."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from fastapi import Request

from serving.server.base.errors import APIError
from serving.traffic.segments import SegmentInfo, segment_from_request
from vigil.config import Settings
from vigil.internal import INTERNAL_HEADER
from vigil.keys import Principal, from_trusted_proxy
from vigil.pseudonym import hash_user

TRUSTED_HEADER_PREFIX = "x-vigil-"
__all__ = ["hash_user", "request_principal", "request_segment"]

OPERATOR_LABELS = ("tenant", "segment")  # `metadata` keys only operator and admin keys may set


def request_principal(request: Request) -> Principal:
    principal = request.scope.get("state", {}).get("principal")
    if principal is None:  # the guard always sets it on /v1; refuse rather than guess
        raise APIError(
            "You didn't provide an API key. Send it as `Authorization: Bearer <key>`.",
            status=401,
            code="missing_api_key",
        )
    return principal


def request_segment(
    request: Request, settings: Settings, user: str | None, metadata: Mapping[str, object] | None
) -> SegmentInfo:
    """Segment identity: `x-vigil-*` headers count only from a trusted proxy; a tenant-bound
    key always logs under its own tenant, whatever the headers or metadata claim; a tenant or
    segment in `metadata`, and the internal mark, count only from operator and admin keys (a
    global key's are ignored: its traffic is logged as sent, never hidden or filed under
    another tenant)."""
    client = request.client.host if request.client else None
    headers: Mapping[str, str] = request.headers
    if not from_trusted_proxy(client, settings.trusted_proxies):
        # the internal marker is not a segment claim; it is judged by the key (below)
        headers = {
            k: v
            for k, v in headers.items()
            if not k.lower().startswith(TRUSTED_HEADER_PREFIX)
            or k.lower() == INTERNAL_HEADER.lower()
        }
    principal = request.scope.get("state", {}).get("principal")
    labels_others = principal is not None and principal.may_label_others
    if not labels_others and metadata:
        metadata = {k: v for k, v in metadata.items() if k not in OPERATOR_LABELS}
    segment = segment_from_request(headers, hash_user(user, settings.secret_key), metadata)
    if principal is not None and principal.tenant is not None:
        segment = dataclasses.replace(segment, tenant=principal.tenant, internal=None)
    elif not labels_others:
        # a tenant's traffic is always watched: only operator keys (the sidecar's judge and
        # canaries) may mark requests internal
        segment = dataclasses.replace(segment, internal=None)
    return segment
