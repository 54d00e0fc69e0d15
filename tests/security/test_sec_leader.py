"""Leader election on the database's clock, with a fencing check at commit time (SQLite and
PostgreSQL): a replica whose clock runs an hour ahead cannot take a live lease, and a leader
that lost its lease mid-job cannot commit."""

from __future__ import annotations

import datetime as dt
from datetime import UTC, timedelta

import pytest
from sqlalchemy import update

import sidecar.leader as leader
from sidecar.leader import SCHEDULER_LOCK, LeaderElector, LeaseLost, db_now, lease_fence
from storage.db import session_factory
from storage.models import Alert, JobLock


class _AheadClock(dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return dt.datetime.now(tz) + timedelta(hours=1)


def test_a_fast_clock_cannot_steal_a_live_lease(migrated_db, monkeypatch):
    """Was: each replica compared the lease with its own clock; one running an hour ahead saw
    every lease as expired and became a second leader."""
    factory = session_factory(migrated_db)
    a = LeaderElector(factory, lease_s=30, holder="replica-a")
    b = LeaderElector(factory, lease_s=30, holder="replica-b")
    assert a.tick()
    monkeypatch.setattr(leader, "datetime", _AheadClock)  # replica b's wall clock is skewed
    assert not b.tick()
    assert a.is_leader and not b.is_leader
    with factory() as s:
        assert s.get(JobLock, SCHEDULER_LOCK).holder == "replica-a"


def test_lease_expiry_uses_the_database_clock(migrated_db):
    factory = session_factory(migrated_db)
    with factory() as s:
        now = db_now(s)
        assert abs((now - dt.datetime.now(UTC)).total_seconds()) < 60  # same host here
        assert leader.try_acquire(s, SCHEDULER_LOCK, "x", 30)
        expires = s.get(JobLock, SCHEDULER_LOCK).expires_at
    assert timedelta(seconds=29) < expires - now < timedelta(seconds=40)


def _alert(key: str) -> Alert:
    now = dt.datetime.now(UTC)
    return Alert(
        dedupe_key=key,
        rule="r",
        kind="k",
        severity="low",
        segment="*",
        status="open",
        summary="s",
        evidence={},
        first_seen=now,
        last_seen=now,
    )


def test_a_leader_that_lost_its_lease_cannot_commit(migrated_db):
    """Was: leadership was checked when a job started; a job still running after its replica
    lost the lease went on committing beside the new leader's."""
    factory = session_factory(migrated_db)
    a = LeaderElector(factory, lease_s=30, holder="replica-a")
    assert a.tick()
    with factory() as s:  # the job of replica a (fenced: the scheduler runs jobs so)
        with lease_fence(SCHEDULER_LOCK, a.holder):
            s.add(_alert("while-leading"))
            s.commit()  # still the leader: goes through
        with factory() as other:  # meanwhile the lease expires and replica b takes it
            other.execute(update(JobLock).values(expires_at=dt.datetime(2000, 1, 1, tzinfo=UTC)))
            other.commit()
            assert leader.try_acquire(other, SCHEDULER_LOCK, "replica-b", 30)
        with lease_fence(SCHEDULER_LOCK, a.holder):
            s.add(_alert("after-losing"))
            with pytest.raises(LeaseLost):
                s.commit()
            s.rollback()
    with factory() as s:
        keys = {a.dedupe_key for a in s.query(Alert)}
    assert keys == {"while-leading"}
    with factory() as s:  # outside a fence, commits are not checked
        s.add(_alert("unfenced"))
        s.commit()
