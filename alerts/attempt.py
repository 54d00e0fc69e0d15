"""One delivery attempt: sign, POST within a hard wall-clock deadline, classify the answer.

The deadline (`delivery_deadline_s`) covers the whole call, connect to the last byte read: the
client's network streams clamp every operation to what is left of it (`alerts/deadline_http.py`),
so a receiver that trickles its reply headers or body is cut there; each single operation is
also bounded by `delivery_timeout_s`. At most `delivery_max_response_bytes` of a reply is read.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from datetime import datetime

import httpx

from alerts.backoff import backoff_delay, retry_after_s
from alerts.deadline_http import within
from alerts.payloads import encode_body
from alerts.signing import signed_headers
from vigil.config import Settings

log = logging.getLogger("alerts.delivery")

# 4xx that a retry can fix; any other 4xx means the request itself is wrong: dead at once
RETRYABLE_4XX = frozenset({408, 409, 425, 429})
ERROR_MAX_CHARS = 500


@dataclass(frozen=True)
class Claimed:
    id: int
    target: str
    idempotency_key: str
    payload: dict
    attempts: int  # including this one


class DeadlineExceeded(httpx.TimeoutException):
    """The whole call (connect to last byte read) ran past `delivery_deadline_s`."""


def post_bounded(
    client: httpx.Client, url: str, body: bytes, headers: dict[str, str], settings: Settings
) -> tuple[httpx.Response, str]:
    """POST and read at most `delivery_max_response_bytes` of the reply within
    `delivery_deadline_s` in total: a receiver that drips or floods its headers or body cannot
    hold the worker (each single operation is also bounded by `delivery_timeout_s`)."""
    deadline = settings.delivery_deadline_s
    timeout = min(settings.delivery_timeout_s, deadline)
    with within(deadline) as ends:
        try:
            with client.stream(
                "POST", url, content=body, headers=headers, timeout=timeout
            ) as response:
                kept = bytearray()
                for chunk in response.iter_raw():
                    if time.monotonic() > ends:  # a client without deadline streams (tests)
                        raise DeadlineExceeded(f"no complete reply within {deadline:g} s")
                    kept += chunk[: settings.delivery_max_response_bytes - len(kept)]
                    if len(kept) >= settings.delivery_max_response_bytes:
                        break  # enough to report; the rest is never read
        except httpx.TimeoutException as exc:
            if time.monotonic() >= ends - 0.01 and not isinstance(exc, DeadlineExceeded):
                raise DeadlineExceeded(f"no complete reply within {deadline:g} s") from exc
            raise
    return response, kept.decode("utf-8", "replace")


def send_attempt(
    client: httpx.Client, row: Claimed, *, now: datetime, settings: Settings, rng: random.Random
) -> tuple[str, str | None, float]:
    """POST one delivery; return (new status, error or None, retry delay in seconds)."""
    body = encode_body(row.payload)
    headers = signed_headers(
        body, settings.webhook_secret, int(now.timestamp()), row.idempotency_key
    )
    delay = backoff_delay(
        row.attempts,
        base_s=settings.delivery_backoff_base_s,
        cap_s=settings.delivery_backoff_cap_s,
        rng=rng,
    )
    try:
        response, reply = post_bounded(client, row.target, body, headers, settings)
    except httpx.HTTPError as exc:  # refused, reset, timed out, DNS, bad URL, ...
        error = f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # never let one bad row stop the worker
        log.exception("delivery %s: unexpected error", row.id)
        error = f"{type(exc).__name__}: {exc}"
    else:
        if response.is_success:
            return "delivered", None, 0.0
        error = f"HTTP {response.status_code}: {reply[:200]}"
        if 400 <= response.status_code < 500 and response.status_code not in RETRYABLE_4XX:
            return "dead", f"permanent client error, not retried: {error}"[:ERROR_MAX_CHARS], 0.0
        wanted = retry_after_s(response.headers.get("Retry-After"))
        if wanted is not None:  # the receiver asked for a pause: honour it, within the cap
            delay = min(max(delay, wanted), settings.delivery_backoff_cap_s)
    error = f"attempt {row.attempts}: {error}"[:ERROR_MAX_CHARS]
    if row.attempts >= settings.delivery_max_attempts:
        return (
            "dead",
            f"gave up after {row.attempts} attempts; last: {error}"[:ERROR_MAX_CHARS],
            0.0,
        )
    return "pending", error, delay
