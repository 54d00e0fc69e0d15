"""Webhook signatures: HMAC-SHA256 over "{timestamp}.{body}" with VIGIL_WEBHOOK_SECRET.

Every delivery carries
    X-Vigil-Timestamp: 1764414000                 (unix seconds when this attempt was signed)
    X-Vigil-Signature: v1=<hex hmac-sha256>       (comma-separated when several secrets sign)
    Idempotency-Key:   vigil-...                  (the same on every retry of one notification)

A receiver verifies like this (Python; any language with HMAC-SHA256 works the same way):

    from alerts.signing import verify, SignatureError
    try:
        verify(raw_body_bytes, request.headers, secret, tolerance_s=300)
    except SignatureError as exc:
        return 401, str(exc)
    if seen(request.headers["Idempotency-Key"]):  # retries re-send: dedupe on the key
        return 200
    ...

Signing the timestamp together with the body makes a captured request useless after the
tolerance window (replay), and comparing with `hmac.compare_digest` leaks no timing.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping, Sequence

TIMESTAMP_HEADER = "X-Vigil-Timestamp"
SIGNATURE_HEADER = "X-Vigil-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"
SCHEME = "v1"
DEFAULT_TOLERANCE_S = 300


class SignatureError(ValueError):
    """The request is not authentic or too old; the message says which check failed."""


def sign(body: bytes, secret: str, timestamp: int) -> str:
    """The header value `v1=<hex>` for `body` signed at `timestamp` (unix seconds)."""
    mac = hmac.new(secret.encode(), f"{int(timestamp)}.".encode() + body, hashlib.sha256)
    return f"{SCHEME}={mac.hexdigest()}"


def signed_headers(
    body: bytes, secret: str, timestamp: int, idempotency_key: str
) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        TIMESTAMP_HEADER: str(int(timestamp)),
        SIGNATURE_HEADER: sign(body, secret, timestamp),
        IDEMPOTENCY_HEADER: idempotency_key,
        "User-Agent": "vigil-alerts/1",
    }


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:  # plain dicts are case-sensitive; HTTP header names are not
        lowered = name.lower()
        value = next((v for k, v in headers.items() if k.lower() == lowered), None)
    return value


def verify(
    body: bytes,
    headers: Mapping[str, str],
    secret: str | Sequence[str],
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    *,
    now: float | None = None,
) -> int:
    """Check a delivery's signature and freshness; return its timestamp or raise SignatureError.

    `secret` may be several secrets (rotation): any one valid signature is enough.
    `now` is unix seconds (default: the wall clock); timestamps more than `tolerance_s` away from
    it, in either direction, are rejected as replays (or clock skew).
    """
    raw_ts = _header(headers, TIMESTAMP_HEADER)
    raw_sig = _header(headers, SIGNATURE_HEADER)
    if raw_ts is None:
        raise SignatureError(f"missing {TIMESTAMP_HEADER} header")
    if raw_sig is None:
        raise SignatureError(f"missing {SIGNATURE_HEADER} header")
    try:
        timestamp = int(raw_ts)
    except ValueError:
        raise SignatureError(f"{TIMESTAMP_HEADER} {raw_ts[:32]!r} is not unix seconds") from None
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_s:
        raise SignatureError(
            f"{TIMESTAMP_HEADER} is {current - timestamp:+.0f} s from now, outside the "
            f"{tolerance_s:g} s window (stale or replayed request)"
        )
    secrets = [secret] if isinstance(secret, str) else list(secret)
    offered = [part.strip() for part in raw_sig.split(",") if part.strip().startswith(f"{SCHEME}=")]
    if not offered:
        raise SignatureError(f"{SIGNATURE_HEADER} has no {SCHEME}= signature")
    for candidate in secrets:
        expected = sign(body, candidate, timestamp)
        if any(hmac.compare_digest(expected, sig) for sig in offered):
            return timestamp
    raise SignatureError("signature mismatch: the body, timestamp or secret differs")
