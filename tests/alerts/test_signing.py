"""Webhook signatures: HMAC-SHA256 over "{timestamp}.{body}", tamper and replay rejected."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from alerts.signing import SignatureError, sign, signed_headers, verify

SECRET = "s3cret-key-for-tests-0001"
BODY = b'{"alert":{"id":7,"severity":"high"},"event":"trigger"}'
TS = 1_764_417_600


def test_signature_is_hmac_sha256_of_timestamp_dot_body():
    # independent computation straight from the definition, not through alerts.signing
    expected = hmac.new(SECRET.encode(), b"1764417600." + BODY, hashlib.sha256).hexdigest()
    assert sign(BODY, SECRET, TS) == "v1=" + expected
    headers = signed_headers(BODY, SECRET, TS, "vigil-a7-trigger-1-abc")
    assert headers["X-Vigil-Timestamp"] == "1764417600"
    keyed = hmac.new(
        SECRET.encode(), b"1764417600.vigil-a7-trigger-1-abc." + BODY, hashlib.sha256
    ).hexdigest()
    assert headers["X-Vigil-Signature"] == f"v1={expected},v2={keyed}"
    assert headers["Idempotency-Key"] == "vigil-a7-trigger-1-abc"


def test_verify_accepts_authentic_request_with_any_header_case():
    headers = signed_headers(BODY, SECRET, TS, "k")
    assert verify(BODY, headers, SECRET, 300, now=TS + 299) == TS
    lowered = {k.lower(): v for k, v in headers.items()}
    assert verify(BODY, lowered, SECRET, 300, now=TS) == TS


@pytest.mark.parametrize(
    "tamper, message",
    [
        (lambda b, h: (b.replace(b"high", b"low"), h), "signature mismatch"),
        (lambda b, h: (b, {**h, "X-Vigil-Timestamp": str(TS + 1)}), "signature mismatch"),
        (lambda b, h: (b, {**h, "X-Vigil-Signature": "v2=" + "0" * 64}), "signature mismatch"),
        (lambda b, h: (b, {**h, "X-Vigil-Signature": "sha1=abc"}), "no v2= signature"),
        (lambda b, h: (b, {**h, "Idempotency-Key": "k-fresh"}), "signature mismatch"),
        (
            lambda b, h: (b, {k: v for k, v in h.items() if k != "X-Vigil-Signature"}),
            "missing X-Vigil-Signature",
        ),
        (
            lambda b, h: (b, {k: v for k, v in h.items() if k != "X-Vigil-Timestamp"}),
            "missing X-Vigil-Timestamp",
        ),
        (lambda b, h: (b, {**h, "X-Vigil-Timestamp": "yesterday"}), "is not unix seconds"),
    ],
)
def test_tampered_requests_are_rejected(tamper, message):
    body, headers = tamper(BODY, signed_headers(BODY, SECRET, TS, "k"))
    with pytest.raises(SignatureError, match=message):
        verify(body, headers, SECRET, 300, now=TS)


def test_wrong_secret_rejected_and_rotation_accepts_either():
    headers = signed_headers(BODY, SECRET, TS, "k")
    with pytest.raises(SignatureError, match="mismatch"):
        verify(BODY, headers, "another-secret-entirely", 300, now=TS)
    assert verify(BODY, headers, ["new-secret-after-rotation", SECRET], 300, now=TS) == TS


@pytest.mark.parametrize("offset", [301, 10_000, -301])
def test_replayed_or_skewed_timestamps_are_rejected(offset):
    headers = signed_headers(BODY, SECRET, TS, "k")
    # the signature itself is valid: only its age is wrong (a captured request replayed later)
    with pytest.raises(SignatureError, match="outside the 300 s window"):
        verify(BODY, headers, SECRET, 300, now=TS + offset)
