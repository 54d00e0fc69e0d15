"""The outbox worker: send due deliveries, retry with backoff, dead-letter after the cap.

One pass (`deliver_due`):
1. claim — in one short transaction, take up to `limit` pending rows whose next_attempt_at is
   due, bump `attempts` and push next_attempt_at out by a lease. PostgreSQL picks the rows with
   FOR UPDATE SKIP LOCKED (several workers never take the same row, nor wait on each other);
   SQLite does it in one UPDATE ... RETURNING statement (its single writer makes that atomic).
   A worker that dies mid-send leaves the row pending: it is due again when the lease ends.
2. send — outside any transaction (no row lock held across the network): sign and POST.
3. record — per row, guarded by the claimed `attempts` so a stale worker cannot overwrite a
   newer claim: 2xx → delivered; a permanent 4xx → dead; else pending with a backoff delay, or
   dead once `delivery_max_attempts` is reached.

At-least-once: a receiver may see a delivery twice (e.g. its 200 was lost on the way back);
the Idempotency-Key header is the same on every retry, so a receiver that dedupes on it sees
each notification exactly once.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
from sqlalchemy import exists, func, select, update
from sqlalchemy.orm import Session, aliased

from alerts.backoff import backoff_delay, retry_after_s
from alerts.payloads import encode_body
from alerts.signing import signed_headers
from storage.models import Delivery
from storage.types import to_utc, utcnow
from vigil.config import Settings, get_settings

log = logging.getLogger(__name__)

# 4xx that a retry can fix; any other 4xx means the request itself is wrong: dead at once
RETRYABLE_4XX = frozenset({408, 409, 425, 429})
ERROR_MAX_CHARS = 500


@dataclass
class DeliveryStats:
    claimed: int = 0
    delivered: int = 0
    retried: int = 0  # failed, scheduled again
    dead: int = 0  # failed for good (dead letter)
    lost_claims: int = 0  # result not recorded: another worker re-claimed the row after our lease


@dataclass(frozen=True)
class _Claimed:
    id: int
    target: str
    idempotency_key: str
    payload: dict
    attempts: int  # including this one


def deliver_due(
    session_factory: Callable[[], Session],
    client: httpx.Client,
    now: datetime | None = None,
    *,
    settings: Settings | None = None,
    limit: int = 50,
    rng: random.Random | None = None,
) -> DeliveryStats:
    """Send every delivery due at `now` (default: the wall clock), at most `limit` of them."""
    settings = settings or get_settings()
    now = to_utc(now) if now is not None else utcnow()
    rng = rng or random.Random()
    # the lease must outlast the sends of the whole batch, or another worker re-sends them
    lease = timedelta(seconds=limit * (settings.delivery_deadline_s + settings.delivery_timeout_s) + 60)
    claimed = _claim(session_factory, now=now, lease_until=now + lease, limit=limit)
    stats = DeliveryStats(claimed=len(claimed))
    started = time.monotonic()
    for row in claimed:
        # sign with the time of this POST, not the pass's start: a long batch must not send
        # timestamps that a receiver's replay window already rejects
        signed_at = now + timedelta(seconds=time.monotonic() - started)
        status, error, delay = _send(client, row, now=signed_at, settings=settings, rng=rng)
        if not _record(session_factory, row, status=status, error=error, now=now, delay=delay):
            stats.lost_claims += 1
        elif status == "delivered":
            stats.delivered += 1
        elif status == "dead":
            stats.dead += 1
        else:
            stats.retried += 1
    return stats


def _claim(session_factory, *, now: datetime, lease_until: datetime, limit: int) -> list[_Claimed]:
    # first in, first out per (alert, target): a "resolve" must never overtake the "trigger" it
    # closes (PagerDuty would open an incident that nothing resolves) — a delivery waits while an
    # older one to the same target for the same alert is still pending (a dead one blocks nothing)
    earlier = aliased(Delivery)
    blocked = exists().where(
        earlier.alert_id == Delivery.alert_id,
        earlier.target == Delivery.target,
        earlier.status == "pending",
        earlier.id < Delivery.id,
    )
    with session_factory() as session, session.begin():
        due = (
            select(Delivery.id)
            .where(Delivery.status == "pending", Delivery.next_attempt_at <= now, ~blocked)
            .order_by(Delivery.next_attempt_at, Delivery.id)
            .limit(limit)
        )
        if session.get_bind().dialect.name == "postgresql":
            ids = list(session.scalars(due.with_for_update(skip_locked=True)))
            if not ids:
                return []
            chosen = Delivery.id.in_(ids)
        else:
            chosen = Delivery.id.in_(due.scalar_subquery())
        stmt = (
            update(Delivery)
            .where(chosen, Delivery.status == "pending")
            .values(attempts=Delivery.attempts + 1, next_attempt_at=lease_until)
            .returning(
                Delivery.id,
                Delivery.target,
                Delivery.idempotency_key,
                Delivery.payload,
                Delivery.attempts,
            )
        )
        rows = session.execute(stmt, execution_options={"synchronize_session": False}).all()
    return sorted((_Claimed(*row) for row in rows), key=lambda c: c.id)


class DeadlineExceeded(httpx.TimeoutException):
    """The whole call (connect to last byte read) ran past `delivery_deadline_s`."""


def _post_bounded(
    client: httpx.Client, url: str, body: bytes, headers: dict[str, str], settings: Settings
) -> tuple[httpx.Response, str]:
    """POST and read at most `delivery_max_response_bytes` of the reply within
    `delivery_deadline_s` in total: a receiver that drips or floods its answer cannot hold the
    worker (each single read is still bounded by `delivery_timeout_s`)."""
    started = time.monotonic()
    deadline = settings.delivery_deadline_s
    timeout = min(settings.delivery_timeout_s, deadline)
    with client.stream("POST", url, content=body, headers=headers, timeout=timeout) as response:
        kept = bytearray()
        for chunk in response.iter_raw():
            if time.monotonic() - started > deadline:
                raise DeadlineExceeded(f"no complete reply within {deadline:g} s")
            kept += chunk[: settings.delivery_max_response_bytes - len(kept)]
            if len(kept) >= settings.delivery_max_response_bytes:
                break  # enough to report; the rest is never read
    return response, kept.decode("utf-8", "replace")


def _send(
    client: httpx.Client, row: _Claimed, *, now: datetime, settings: Settings, rng: random.Random
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
        response, reply = _post_bounded(client, row.target, body, headers, settings)
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


def _record(
    session_factory, row: _Claimed, *, status: str, error: str | None, now: datetime, delay: float
) -> bool:
    values: dict = {"status": status, "last_error": error}
    if status == "delivered":
        values["delivered_at"] = now
    elif status == "pending":
        values["next_attempt_at"] = now + timedelta(seconds=delay)
    with session_factory() as session, session.begin():
        result = session.execute(
            update(Delivery)
            .where(
                Delivery.id == row.id,
                Delivery.status == "pending",
                Delivery.attempts == row.attempts,
            )
            .values(**values),
            execution_options={"synchronize_session": False},
        )
        return result.rowcount == 1


def list_dead_letters(session: Session, *, limit: int = 100, offset: int = 0) -> list[Delivery]:
    """Dead deliveries, newest first, with `last_error` saying why they gave up."""
    query = select(Delivery).where(Delivery.status == "dead").order_by(Delivery.id.desc())
    return list(session.scalars(query.limit(limit).offset(offset)))


def retry_dead(session: Session, delivery_id: int, *, now: datetime | None = None) -> Delivery:
    """Put a dead delivery back in the queue, due now, with a fresh attempt budget. The caller
    commits. The idempotency key is kept: a receiver that did get it once ignores the repeat."""
    delivery = session.get(Delivery, delivery_id)
    if delivery is None:
        raise LookupError(f"delivery {delivery_id} does not exist")
    if delivery.status != "dead":
        raise ValueError(
            f"delivery {delivery_id} is {delivery.status}, not dead: only dead letters are retried"
        )
    delivery.status = "pending"
    delivery.attempts = 0
    delivery.next_attempt_at = to_utc(now) if now is not None else utcnow()
    session.flush()
    return delivery


def outbox_counts(session: Session) -> dict[str, int]:
    """Deliveries per status (pending, delivered, dead) for health pages and metrics."""
    rows = session.execute(select(Delivery.status, func.count()).group_by(Delivery.status))
    return {status: count for status, count in rows}
