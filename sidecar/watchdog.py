"""The sidecar watching its own schedule: silence must mean "no drift", never "nothing ran".

Two monitoring conditions, checked by a thread of their own (a stalled scheduler cannot report
its own stall from inside a job):

- `monitor_leader_lost` — no replica holds a valid scheduler lease: for a whole lease period,
  or at once after this replica lost its lease (sidecar.leader) and nobody took it over. Every
  replica checks; the alert is deduped, and resolved by the first check that sees a lease held.
- `monitor_scheduler_stalled` (segment `job=<name>`) — on the leader, a scheduled job has not
  finished a run (ok or failed) for Settings.monitor_stall_intervals of its intervals, counted
  from when this replica took the lead at the earliest. Resolved once the job runs again.
  Jobs run one at a time: while one is running within its own timeout (`JobSpec.timeout_s`,
  e.g. an embed job working through a backlog) no job counts as stalled — the others wait
  their turn; past its timeout, the running job is the stalled one.

Jobs record each start and each finished run in `job_cursors` (`record_job_start`,
`record_job_run`, called by the scheduler).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from alerts.service import raise_condition
from sidecar.cursors import get_cursor, set_cursor
from sidecar.leader import SCHEDULER_LOCK, db_now
from storage.models import JobLock
from storage.types import to_utc
from vigil.config import Settings

log = logging.getLogger("vigil.sidecar.watchdog")

LEADER_LOST = "monitor_leader_lost"
STALLED = "monitor_scheduler_stalled"
RUN_CURSOR = "job_ran:{}"
START_CURSOR = "job_started:{}"
DEFAULT_TIMEOUT_S = 1800.0


def record_job_run(session_factory: sessionmaker[Session], name: str, finished: datetime) -> None:
    """Note that job `name` finished a run (never raises: the job's own work is done)."""
    _mark(session_factory, RUN_CURSOR.format(name), finished)


def record_job_start(session_factory: sessionmaker[Session], name: str, started: datetime) -> None:
    """Note that job `name` started a run (never raises: the run goes ahead regardless)."""
    _mark(session_factory, START_CURSOR.format(name), started)


def _mark(session_factory: sessionmaker[Session], cursor: str, at: datetime) -> None:
    try:
        with session_factory() as session:
            set_cursor(session, cursor, to_utc(at).isoformat(), at)
            session.commit()
    except Exception as exc:
        log.warning("could not record %s: %s: %s", cursor, type(exc).__name__, exc)


@dataclass(frozen=True)
class ScheduledJob:
    name: str
    interval_s: float
    timeout_s: float = DEFAULT_TIMEOUT_S  # a run this long is still working, not stalled


def _time(session: Session, cursor: str) -> datetime | None:
    raw = get_cursor(session, cursor)
    return to_utc(datetime.fromisoformat(raw)) if raw else None


def running_within_timeout(session: Session, jobs: list[ScheduledJob], now: datetime) -> str | None:
    """The job now running (started after its last finish) and still inside its timeout."""
    for job in jobs:
        started, finished = (
            _time(session, START_CURSOR.format(job.name)),
            _time(session, RUN_CURSOR.format(job.name)),
        )
        if (
            started is not None
            and (finished is None or started > finished)
            and to_utc(now) - started <= timedelta(seconds=job.timeout_s)
        ):
            return job.name
    return None


def check_leader(session: Session, settings: Settings, *, lost_at: datetime | None) -> bool:
    """Raise or resolve `monitor_leader_lost`; True when some replica holds the lease."""
    now = db_now(session)
    lock = session.get(JobLock, SCHEDULER_LOCK)
    expires = None if lock is None else to_utc(lock.expires_at)
    grace = timedelta(0) if lost_at is not None else timedelta(seconds=settings.leader_lease_s)
    healthy = expires is not None and expires + grace >= now
    raise_condition(
        session, LEADER_LOST, healthy=healthy, now=now, settings=settings,
        summary=None if healthy else (
            "no sidecar replica holds the scheduler lease: no drift, embed or eval job is running"),
        evidence={"lease_expires_at": None if expires is None else expires.isoformat(),
                  "holder": None if lock is None else lock.holder,
                  "lost_here_at": None if lost_at is None else to_utc(lost_at).isoformat()},
    )  # fmt: skip
    return healthy


def check_jobs(
    session: Session,
    settings: Settings,
    jobs: Iterable[ScheduledJob],
    *,
    leader_since: datetime,
    now: datetime,
) -> list[str]:
    """Raise or resolve `monitor_scheduler_stalled` per job; returns the stalled jobs' names."""
    stalled = []
    jobs = list(jobs)
    busy = running_within_timeout(session, jobs, now)
    for job in jobs:
        raw = get_cursor(session, RUN_CURSOR.format(job.name))
        last = (
            max(to_utc(datetime.fromisoformat(raw)), to_utc(leader_since))
            if raw
            else to_utc(leader_since)
        )
        limit = timedelta(seconds=settings.monitor_stall_intervals * job.interval_s)
        late = to_utc(now) - last
        healthy = late <= limit or busy is not None  # waiting for the running job is not a stall
        if not healthy:
            stalled.append(job.name)
        raise_condition(
            session, STALLED, f"job={job.name}", healthy=healthy, now=now, settings=settings,
            summary=None if healthy else (
                f"the {job.name} job has not run for {late.total_seconds() / 60:.0f} min "
                f"(every {job.interval_s / 60:g} min expected): the scheduler is stalled"),
            evidence={"job": job.name, "last_run": raw, "interval_s": job.interval_s,
                      "limit_s": limit.total_seconds(), "timeout_s": job.timeout_s},
        )  # fmt: skip
    return stalled


class Watchdog:
    """A daemon thread running the two checks every `period_s` (commits after each)."""

    def __init__(
        self,
        settings: Settings,
        session_factory: sessionmaker[Session],
        *,
        is_leader: Callable[[], bool],
        lost_at: Callable[[], datetime | None],
        scheduled: Callable[[], list[ScheduledJob]],
        period_s: float | None = None,
    ) -> None:
        self.settings = settings
        self.session_factory = session_factory
        self.is_leader = is_leader
        self.lost_at = lost_at
        self.scheduled = scheduled
        self.period_s = period_s or max(settings.leader_lease_s, 1.0)
        self._leader_since: datetime | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self, now: datetime | None = None) -> None:
        now = now or datetime.now(UTC)
        leading = self.is_leader()
        if leading and self._leader_since is None:
            self._leader_since = now
        elif not leading:
            self._leader_since = None
        try:
            with self.session_factory() as session:
                check_leader(session, self.settings, lost_at=None if leading else self.lost_at())
                if leading:
                    check_jobs(
                        session,
                        self.settings,
                        self.scheduled(),
                        leader_since=self._leader_since or now,  # set above when leading
                        now=now,
                    )
                session.commit()
        except Exception as exc:  # the database is down: the next tick tries again
            log.warning("watchdog check failed: %s: %s", type(exc).__name__, exc)

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self.tick()

    def start(self) -> Watchdog:
        self._thread = threading.Thread(target=self._loop, name="vigil-watchdog", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.period_s)
