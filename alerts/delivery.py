"""The outbox worker: send due deliveries, retry with backoff, dead-letter after the cap.

One pass (`deliver_due`):
1. claim — in one short transaction, take up to `limit` pending rows whose next_attempt_at is
   due, bump `attempts` and push next_attempt_at out by a lease. PostgreSQL picks the rows with
   FOR UPDATE SKIP LOCKED (several workers never take the same row, nor wait on each other);
   SQLite does it in one UPDATE ... RETURNING statement (its single writer makes that atomic).
   A worker that dies mid-send leaves the row pending: it is due again when the lease ends.
2. send — outside any transaction (no row lock held across the network): sign and POST, within
   a hard deadline (`alerts/attempt.py`).
3. record — per row, guarded by the claimed `attempts` so a stale worker cannot overwrite a
   newer claim: 2xx → delivered; a permanent 4xx → dead; else pending with a backoff delay, or
   dead once `delivery_max_attempts` is reached.

At-least-once: a receiver may see a delivery twice (e.g. its 200 was lost on the way back);
the Idempotency-Key header is the same on every retry, so a receiver that dedupes on it sees
each notification exactly once.

`target` restricts a pass to one webhook URL: the worker (`alerts/worker.py`) runs one pass per
target on its own thread, so a slow receiver delays only its own notifications; `due_targets`
names the targets that have something to send.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
from sqlalchemy import exists, func, or_, select, update
from sqlalchemy.orm import Session, aliased

from alerts.attempt import Claimed, send_attempt
from storage.models import Delivery
from storage.types import to_utc, utcnow
from vigil.config import Settings, get_settings

log = logging.getLogger(__name__)


@dataclass
class DeliveryStats:
    claimed: int = 0
    delivered: int = 0
    retried: int = 0  # failed, scheduled again
    dead: int = 0  # failed for good (dead letter)
    lost_claims: int = 0  # result not recorded: another worker re-claimed the row after our lease


def deliver_due(
    session_factory: Callable[[], Session],
    client: httpx.Client,
    now: datetime | None = None,
    *,
    settings: Settings | None = None,
    limit: int = 50,
    rng: random.Random | None = None,
    target: str | None = None,
) -> DeliveryStats:
    """Send every delivery due at `now` (default: the wall clock), at most `limit` of them
    (only those to `target` when it is given)."""
    settings = settings or get_settings()
    now = to_utc(now) if now is not None else utcnow()
    rng = rng or random.Random()
    # the lease must outlast the sends of the whole batch, or another worker re-sends them
    lease = timedelta(
        seconds=limit * (settings.delivery_deadline_s + settings.delivery_timeout_s) + 60
    )
    claimed = _claim(session_factory, now=now, lease_until=now + lease, limit=limit, target=target)
    stats = DeliveryStats(claimed=len(claimed))
    started = time.monotonic()
    for row in claimed:
        # sign with the time of this POST, not the pass's start: a long batch must not send
        # timestamps that a receiver's replay window already rejects
        signed_at = now + timedelta(seconds=time.monotonic() - started)
        status, error, delay = send_attempt(client, row, now=signed_at, settings=settings, rng=rng)
        if not _record(session_factory, row, status=status, error=error, now=now, delay=delay):
            stats.lost_claims += 1
        elif status == "delivered":
            stats.delivered += 1
        elif status == "dead":
            stats.dead += 1
        else:
            stats.retried += 1
    return stats


def _due(now: datetime):
    """Pending rows due at `now`, first in, first out per (incident, target): a "resolve" must
    never overtake the "trigger" it closes (PagerDuty would open an incident that nothing
    resolves) — a delivery waits while an older one to the same target for the same incident (or
    alert) is still pending (a dead one blocks nothing)."""
    earlier = aliased(Delivery)
    blocked = exists().where(
        or_(earlier.alert_id == Delivery.alert_id, earlier.incident_id == Delivery.incident_id),
        earlier.target == Delivery.target,
        earlier.status == "pending",
        earlier.id < Delivery.id,
    )
    return (Delivery.status == "pending", Delivery.next_attempt_at <= now, ~blocked)


def due_targets(
    session_factory, now: datetime, *, exclude: Collection[str] = (), limit: int = 16
) -> list[str]:
    """Targets with a delivery due at `now`, the longest-waiting first, not those in `exclude`."""
    query = select(Delivery.target).where(*_due(now)).group_by(Delivery.target)
    if exclude:
        query = query.where(Delivery.target.not_in(list(exclude)))
    with session_factory() as session:
        return list(
            session.scalars(query.order_by(func.min(Delivery.next_attempt_at)).limit(limit))
        )


def _claim(
    session_factory, *, now: datetime, lease_until: datetime, limit: int, target: str | None = None
) -> list[Claimed]:
    with session_factory() as session, session.begin():
        due = select(Delivery.id).where(*_due(now))
        if target is not None:
            due = due.where(Delivery.target == target)
        due = due.order_by(Delivery.next_attempt_at, Delivery.id).limit(limit)
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
    return sorted((Claimed(*row) for row in rows), key=lambda c: c.id)


def _record(
    session_factory, row: Claimed, *, status: str, error: str | None, now: datetime, delay: float
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
