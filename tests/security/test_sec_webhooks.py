"""Webhook hardening: the Idempotency-Key is signed with the body (v2), and one webhook call has
a total deadline and reads a bounded reply, whatever the receiver does."""

from __future__ import annotations

import random
import socket
import threading
import time
from datetime import UTC, datetime

import httpx
import pytest

from alerts.delivery import Claimed, send_attempt
from alerts.signing import SignatureError, signed_headers, verify
from vigil.config import load_settings

SECRET = "sec-webhook-secret-0123456789"
BODY = b'{"alert":{"id":1}}'
TS = 1_764_417_600


def test_a_captured_request_cannot_be_resent_under_a_new_idempotency_key():
    """Was: the key was not signed, so a replay inside the tolerance window with a fresh key
    passed verification and slipped past the receiver's dedupe."""
    headers = signed_headers(BODY, SECRET, TS, "vigil-1-trigger-1")
    assert verify(BODY, headers, SECRET, now=TS) == TS
    with pytest.raises(SignatureError, match="mismatch"):
        verify(BODY, {**headers, "Idempotency-Key": "vigil-1-trigger-2"}, SECRET, now=TS)
    v1_only = {**headers, "X-Vigil-Signature": headers["X-Vigil-Signature"].split(",")[0]}
    with pytest.raises(SignatureError, match="unsigned"):  # no silent downgrade to v1
        verify(BODY, {**v1_only, "Idempotency-Key": "other"}, SECRET, now=TS)
    assert verify(BODY, v1_only, SECRET, now=TS, require_key_signature=False) == TS


class Receiver:
    """A raw HTTP receiver: answers 500 and then drips or floods the body."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"
        self.sent = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            conn.recv(65536)
            if self.mode == "drip":
                conn.sendall(b"HTTP/1.1 500 Oops\r\nContent-Length: 100000\r\n\r\n")
                for _ in range(60):  # 12 s of one byte every 0.2 s (each read is "on time")
                    try:
                        conn.sendall(b"x")
                    except OSError:
                        return
                    self.sent += 1
                    time.sleep(0.2)
            else:
                conn.sendall(b"HTTP/1.1 500 Oops\r\nContent-Length: 50000000\r\n\r\n")
                chunk = b"y" * 65536
                try:
                    while self.sent < 50_000_000:
                        conn.sendall(chunk)
                        self.sent += len(chunk)
                except OSError:
                    return


def _deliver(url: str, **overrides):
    settings = load_settings(
        webhook_secret=SECRET,
        delivery_timeout_s=1.0,
        delivery_deadline_s=1.5,
        delivery_max_response_bytes=4096,
        **overrides,
    )
    row = Claimed(id=1, target=url, idempotency_key="k1", payload={"a": 1}, attempts=1)
    with httpx.Client() as client:
        start = time.monotonic()
        status, error, _ = send_attempt(
            client, row, now=datetime.now(UTC), settings=settings, rng=random.Random(0)
        )
        return status, error, time.monotonic() - start


def test_a_dripping_receiver_is_cut_at_the_deadline():
    """Was: only each single read had a timeout; a byte every 0.2 s held the worker 12 s."""
    receiver = Receiver("drip")
    status, error, took = _deliver(receiver.url)
    assert status == "pending" and "1.5 s" in error
    assert took < 1.5 + 1.0 + 0.5  # the deadline plus at most one read timeout


def test_a_flooding_receiver_is_read_only_up_to_the_cap():
    receiver = Receiver("flood")
    status, error, _ = _deliver(receiver.url)
    assert status == "pending" and "HTTP 500" in error and len(error) < 600
    time.sleep(0.2)
    assert receiver.sent < 10_000_000  # the 50 MB reply was abandoned early
