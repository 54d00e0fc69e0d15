"""Leader lease in job_locks (SQLite and PostgreSQL) and the persistent job schedule."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from apscheduler.triggers.interval import IntervalTrigger

from sidecar.leader import SCHEDULER_LOCK, LeaderElector, release, try_acquire
from sidecar.scheduler import JOBS, build_scheduler, ensure_jobs
from storage.db import get_engine, session_factory
from storage.models import JobLock


def test_only_one_of_many_concurrent_candidates_wins(migrated_db):
    factory = session_factory(migrated_db)
    winners: list[str] = []
    barrier = threading.Barrier(6)

    def contend(name: str) -> None:
        with factory() as s:
            barrier.wait()
            if try_acquire(s, SCHEDULER_LOCK, name, lease_s=30):
                winners.append(name)

    threads = [threading.Thread(target=contend, args=(f"r{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1
    with factory() as s:
        assert s.get(JobLock, SCHEDULER_LOCK).holder == winners[0]


def test_lease_renews_expires_and_is_released(migrated_db):
    factory = session_factory(migrated_db)
    t0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    with factory() as s:
        assert try_acquire(s, SCHEDULER_LOCK, "a", 10, now=t0)
        assert not try_acquire(s, SCHEDULER_LOCK, "b", 10, now=t0 + timedelta(seconds=5))
        assert try_acquire(s, SCHEDULER_LOCK, "a", 10, now=t0 + timedelta(seconds=8))  # renewal
        # b may not take it at 12 s: a renewed at 8 s until 18 s
        assert not try_acquire(s, SCHEDULER_LOCK, "b", 10, now=t0 + timedelta(seconds=12))
        assert try_acquire(s, SCHEDULER_LOCK, "b", 10, now=t0 + timedelta(seconds=19))  # expired
        assert not try_acquire(s, SCHEDULER_LOCK, "a", 10, now=t0 + timedelta(seconds=20))
        release(s, SCHEDULER_LOCK, "b")
        assert try_acquire(s, SCHEDULER_LOCK, "a", 10, now=t0 + timedelta(seconds=21))


def test_electors_hand_over_on_stop(migrated_db):
    factory = session_factory(migrated_db)
    events: list[str] = []
    a = LeaderElector(factory, lease_s=30, holder="a", on_elected=lambda: events.append("a+"),
                      on_demoted=lambda: events.append("a-"))  # fmt: skip
    b = LeaderElector(factory, lease_s=30, holder="b", on_elected=lambda: events.append("b+"))
    assert a.tick() and a.is_leader
    assert not b.tick() and not b.is_leader
    a.stop()  # releases the lease: b need not wait 30 s
    assert not a.is_leader
    assert b.tick() and b.is_leader
    assert events == ["a+", "a-", "b+"]


def test_schedule_persists_across_restart(migrated_db, make_settings):
    settings = make_settings(migrated_db, drift_interval_s=3600)
    engine = get_engine(migrated_db)
    first = build_scheduler(engine)
    first.start(paused=True)
    ensure_jobs(first, settings, run_now=False)
    planned = {job.id: job.next_run_time for job in first.get_jobs()}
    first.shutdown(wait=False)
    assert set(planned) == {spec.name for spec in JOBS}

    second = build_scheduler(engine)  # a restarted sidecar: same database, new process state
    second.start(paused=True)
    try:
        ensure_jobs(second, settings, run_now=False)
        again = {job.id: job.next_run_time for job in second.get_jobs()}
        assert again == planned  # nothing reset, nothing lost
        drift = second.get_job("drift")
        assert isinstance(drift.trigger, IntervalTrigger)
        assert drift.trigger.interval == timedelta(seconds=3600)
        # the drift job fires just after each whole hour (grace 60 s), not an hour after start
        assert (drift.next_run_time.minute, drift.next_run_time.second) == (1, 0)
        # a changed interval replaces the job; run_now pulls every job to now
        changed = make_settings(migrated_db, drift_interval_s=600)
        ensure_jobs(second, changed, run_now=True)
        assert second.get_job("drift").trigger.interval == timedelta(seconds=600)
        assert all(j.next_run_time <= datetime.now(UTC) for j in second.get_jobs())
    finally:
        second.shutdown(wait=False)


def test_replicas_starting_together_do_not_race_on_the_job_table(pg_url):
    """Without care, PostgreSQL answers one of two concurrent CREATE TABLEs with a unique
    violation (pg_type) and that replica would crash at start-up."""
    from storage.db import make_engine

    errors: list[str] = []
    barrier = threading.Barrier(6)

    def start() -> None:
        engine = make_engine(pg_url)
        try:
            barrier.wait()
            build_scheduler(engine)
        except Exception as exc:  # collected: the assertion below names it
            errors.append(repr(exc)[:300])
        finally:
            engine.dispose()

    threads = [threading.Thread(target=start) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
