"""Leader election for the sidecar's scheduler: a lease row in `job_locks`.

Several sidecar replicas may share one database. Only the replica holding the lease runs the
scheduled jobs; the others stand by and take over once the lease expires (the holder died or
lost the database). Acquire and renew are one conditional UPDATE — atomic on SQLite and on
PostgreSQL (the row lock re-checks the WHERE clause) — so two replicas can never both win.

Lease times come from the database's clock, never a replica's: a replica whose clock runs
ahead cannot declare a live lease expired. Locally, a replica trusts its lease for `lease_s`
of monotonic time from just before its last renewal. Leadership is also checked where it
matters: a job runs inside `lease_fence`, and every commit it makes first re-checks (and row-
locks) the lease in the same transaction, so a leader that lost its lease mid-job cannot commit.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

from sqlalchemy import and_, event, or_, text, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from storage.models import JobLock
from storage.repositories._sql import affected_rows

log = logging.getLogger("vigil.sidecar.leader")

SCHEDULER_LOCK = "sidecar-scheduler"


def make_holder_id() -> str:
    """Unique per process start: host, pid and a random suffix (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class LeaseLost(RuntimeError):
    """A fenced commit found that this replica no longer holds the lease."""


def db_now(session: Session) -> datetime:
    """The database server's current time, aware UTC (the one clock all replicas share)."""
    if session.get_bind().dialect.name == "sqlite":
        raw = session.execute(text("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')")).scalar_one()
        return datetime.fromisoformat(raw).replace(tzinfo=UTC)
    value: datetime = session.execute(text("SELECT clock_timestamp()")).scalar_one()
    return value.astimezone(UTC)


def try_acquire(
    session: Session, name: str, holder: str, lease_s: float, now: datetime | None = None
) -> bool:
    """Take or renew lease `name` for `holder`; True when `holder` holds it afterwards.
    `now` defaults to the database's clock (tests pass their own)."""
    now = now or db_now(session)
    expires = now + timedelta(seconds=lease_s)
    stmt = (
        update(JobLock)
        .where(and_(JobLock.name == name, or_(JobLock.holder == holder, JobLock.expires_at < now)))
        .values(holder=holder, expires_at=expires)
    )
    if affected_rows(session, stmt) == 1:
        session.commit()
        return True
    session.commit()
    try:  # no row yet: the first replica to insert it wins, the others hit the primary key
        session.add(JobLock(name=name, holder=holder, expires_at=expires))
        session.commit()
        return True
    except IntegrityError:
        session.rollback()
        return False


def holds_lease(session: Session, name: str, holder: str) -> bool:
    """Whether `holder` holds an unexpired lease now, by the database's clock. A no-op UPDATE:
    it also row-locks the lease until this transaction ends, so no one can take it meanwhile."""
    stmt = (
        update(JobLock)
        .where(
            and_(
                JobLock.name == name, JobLock.holder == holder, JobLock.expires_at > db_now(session)
            )
        )
        .values(holder=holder)
    )
    return affected_rows(session, stmt) == 1


_fence = threading.local()


@contextlib.contextmanager
def lease_fence(name: str, holder: str) -> Iterator[None]:
    """While active on this thread, every Session commit first checks the lease (LeaseLost)."""
    previous = getattr(_fence, "lease", None)
    _fence.lease = (name, holder)
    try:
        yield
    finally:
        _fence.lease = previous


@event.listens_for(Session, "before_commit")
def _check_fence(session: Session) -> None:
    lease = getattr(_fence, "lease", None)
    if lease is None or getattr(_fence, "checking", False):
        return
    _fence.checking = True
    try:
        if not holds_lease(session, *lease):
            raise LeaseLost(f"{lease[1]} no longer holds lease {lease[0]!r}: commit refused")
    finally:
        _fence.checking = False


def release(session: Session, name: str, holder: str) -> None:
    """Give the lease up at once (clean shutdown) so a standby need not wait for expiry."""
    stmt = (
        update(JobLock)
        .where(and_(JobLock.name == name, JobLock.holder == holder))
        .values(expires_at=datetime(1970, 1, 1, tzinfo=UTC))
    )
    session.execute(stmt)
    session.commit()


class LeaderElector:
    """A daemon thread that keeps trying for the lease every `lease_s / 3` seconds.

    `on_elected` / `on_demoted` are called from this thread on each change. A replica that
    cannot reach the database to renew demotes itself before its lease can run out elsewhere.
    """

    def __init__(
        self,
        session_factory: sessionmaker[Session],
        *,
        lease_s: float,
        name: str = SCHEDULER_LOCK,
        holder: str | None = None,
        on_elected: Callable[[], None] = lambda: None,
        on_demoted: Callable[[], None] = lambda: None,
    ) -> None:
        self.session_factory = session_factory
        self.lease_s = lease_s
        self.name = name
        self.holder = holder or make_holder_id()
        self.on_elected = on_elected
        self.on_demoted = on_demoted
        self._is_leader = False
        self.lost_at: datetime | None = None  # when this replica last lost the lease in a tick
        self._last_renewed: float | None = None  # time.monotonic() just before the last renewal
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def is_leader(self) -> bool:
        # a lease we could not renew in time is not ours any more, whatever the thread thinks
        if not self._is_leader or self._last_renewed is None:
            return False
        return time.monotonic() - self._last_renewed < self.lease_s  # immune to clock steps

    def tick(self) -> bool:
        """One election round; returns whether this replica leads afterwards."""
        asked_at = time.monotonic()
        try:
            with self.session_factory() as session:
                won = try_acquire(session, self.name, self.holder, self.lease_s)
        except Exception as exc:  # the database is down or odd: never kill the election thread
            log.warning(
                "leader lease check failed (%s: %s); standing by", exc.__class__.__name__, exc
            )
            won = False
        if won:
            self._last_renewed = asked_at
        if won and not self._is_leader:
            self._is_leader = True
            log.info("%s is now the scheduler leader", self.holder)
            self.on_elected()
        elif not won and self._is_leader:
            self._is_leader = False
            self.lost_at = datetime.now(UTC)  # the watchdog alerts if nobody takes the lease over
            log.warning("%s lost the scheduler lease; standing by", self.holder)
            self.on_demoted()
        elif won:
            self.lost_at = None
        return won

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.tick()
            self._stop.wait(self.lease_s / 3)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="vigil-leader", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.lease_s)
        if self._is_leader:
            self._is_leader = False
            self.on_demoted()
            try:
                with self.session_factory() as session:
                    release(session, self.name, self.holder)
            except OperationalError:
                pass  # the lease simply expires
