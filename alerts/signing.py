"""Webhook signatures: HMAC-SHA256 keyed with VIGIL_WEBHOOK_SECRET (v1: body, v2: also the key).

Every delivery carries
    X-Vigil-Timestamp: 1764414000                 (unix seconds when this attempt was signed)
    X-Vigil-Signature: v1=<hex>,v2=<hex>          (v2 also covers the Idempotency-Key)
    Idempotency-Key:   vigil-...                  (the same on every retry of one notification)

v1 = HMAC-SHA256 over "{timestamp}.{body}"; v2 = HMAC-SHA256 over "{timestamp}.{key}.{body}"
with key = the Idempotency-Key. `verify` requires v2 by default: with v1 alone, someone who
captured a request could resend it under a fresh Idempotency-Key and slip past the receiver's
dedupe within the tolerance window.

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
KEYED_SCHEME = "v2"
DEFAULT_TOLERANCE_S = 300


class SignatureError(ValueError):
    """The request is not authentic or too old; the message says which check failed."""


def sign(body: bytes, secret: str, timestamp: int) -> str:
    """The header value `v1=<hex>` for `body` signed at `timestamp` (unix seconds)."""
    mac = hmac.new(secret.encode(), f"{int(timestamp)}.".encode() + body, hashlib.sha256)
    return f"{SCHEME}={mac.hexdigest()}"


def sign_keyed(body: bytes, secret: str, timestamp: int, idempotency_key: str) -> str:
    """`v2=<hex>`: the signature that binds the Idempotency-Key to the body and timestamp."""
    signed = f"{int(timestamp)}.{idempotency_key}.".encode() + body
    return f"{KEYED_SCHEME}={hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()}"


def signed_headers(
    body: bytes, secret: str, timestamp: int, idempotency_key: str
) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        TIMESTAMP_HEADER: str(int(timestamp)),
        SIGNATURE_HEADER: f"{sign(body, secret, timestamp)},"
        f"{sign_keyed(body, secret, timestamp, idempotency_key)}",
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
    require_key_signature: bool = True,
) -> int:
    """Check a delivery's signature and freshness; return its timestamp or raise SignatureError.

    `secret` may be several secrets (rotation): any one valid signature is enough.
    `now` is unix seconds (default: the wall clock); timestamps more than `tolerance_s` away from
    it, in either direction, are rejected as replays (or clock skew). A v2 signature (covering
    the Idempotency-Key) is required unless `require_key_signature=False` (v1-only senders).
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
    parts = [part.strip() for part in raw_sig.split(",")]
    keyed = [p for p in parts if p.startswith(f"{KEYED_SCHEME}=")]
    plain = [p for p in parts if p.startswith(f"{SCHEME}=")]
    if keyed:
        key = _header(headers, IDEMPOTENCY_HEADER)
        if key is None:
            raise SignatureError(f"missing {IDEMPOTENCY_HEADER} header (signed by {KEYED_SCHEME})")
        for candidate in secrets:
            expected = sign_keyed(body, candidate, timestamp, key)
            if any(hmac.compare_digest(expected, sig) for sig in keyed):
                return timestamp
        raise SignatureError(
            "signature mismatch: the body, timestamp, Idempotency-Key or secret differs"
        )
    if require_key_signature:
        raise SignatureError(
            f"{SIGNATURE_HEADER} has no {KEYED_SCHEME}= signature (the Idempotency-Key is unsigned)"
        )
    if not plain:
        raise SignatureError(f"{SIGNATURE_HEADER} has no {SCHEME}= signature")
    for candidate in secrets:
        expected = sign(body, candidate, timestamp)
        if any(hmac.compare_digest(expected, sig) for sig in plain):
            return timestamp
    raise SignatureError("signature mismatch: the body, timestamp or secret differs")
