"""The sidecar's own health as `monitoring` alerts (SQLite and PostgreSQL): an embed or eval
backlog past its limit, dead-lettered deliveries, a stalled scheduler and a lost leader each
raise one deduped alert, resolved once healthy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import numpy as np
from sqlalchemy import select, update

import sidecar.jobs.embed as embed_job
from alerts.service import raise_alerts
from alerts.worker import DEAD_LETTERS, DeliveryWorker
from sidecar.backlog import RULE as BACKLOG
from sidecar.evals.judge import EngineUnavailable
from sidecar.jobs.evaluate import run_evaluate_job
from sidecar.leader import SCHEDULER_LOCK, db_now, try_acquire
from sidecar.watchdog import (
    LEADER_LOST,
    STALLED,
    ScheduledJob,
    check_jobs,
    check_leader,
    record_job_run,
    record_job_start,
)
from storage.db import session_factory
from storage.models import Alert, JobLock
from storage.repositories.samples import insert_samples

NOW = datetime.now(UTC).replace(microsecond=0)


def _open(factory, rule: str) -> dict[str, Alert]:
    with factory() as s:
        rows = s.scalars(select(Alert).where(Alert.rule == rule, Alert.status == "open"))
        return {a.segment: a for a in rows}


def _samples(
    factory, n: int, arrived: datetime, at: datetime | None = None, prefix: str = "s"
) -> None:
    records = [
        {
            "id": f"{prefix}{i}",
            "timestamp": (at or arrived).isoformat(),
            "prompt": f"question {i}",
            "response": "answer",
        }
        for i in range(n)
    ]
    with factory() as s:
        insert_samples(s, records, now=arrived)
        s.commit()


class FakeEmbedder:
    def __init__(self, name: str) -> None:
        self.name, self.dim = name, 4

    def encode(self, texts):
        return np.ones((len(texts), 4), dtype=np.float32)


def test_embed_backlog_alerts_then_resolves(migrated_db, make_settings, monkeypatch):
    settings = make_settings(migrated_db, embed_interval_s=60, monitor_backlog_intervals=10)
    factory = session_factory(migrated_db)
    # rows of the last complete window (the drift job has not run it yet), which arrived 50 min ago
    _samples(factory, 5, NOW - timedelta(minutes=50), at=NOW - timedelta(hours=1))
    _samples(factory, 3, NOW - timedelta(hours=5), prefix="old")  # rows no window will read
    monkeypatch.setattr(embed_job, "MAX_BATCHES_PER_RUN", 0)  # the job falls behind
    embed_job.run_embed_job(settings, factory, NOW)
    alert = _open(factory, BACKLOG)["job=embed"]
    assert alert.kind == "monitoring" and alert.summary.startswith(
        "the embed job is 50 min behind: the oldest sample a drift window reads without a vector "
        "arrived 50 min ago (limit 10 min)"
    )
    assert alert.evidence["age_s"] == 3000 and alert.evidence["limit_s"] == 600
    assert alert.evidence["waiting"] == 5  # the unread rows are not the drift job's backlog

    monkeypatch.setattr(embed_job, "MAX_BATCHES_PER_RUN", 40)
    monkeypatch.setattr(
        embed_job, "get_embedder", lambda _p: FakeEmbedder(embed_job.model_name(settings))
    )
    assert embed_job.run_embed_job(settings, factory, NOW).samples == 5 + 3  # then the unread rows
    assert _open(factory, BACKLOG) == {}  # caught up: resolved


def test_eval_backlog_while_the_engine_is_down(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    _samples(factory, 3, NOW - timedelta(hours=1))

    class DownJudge:
        def judge(self, prompt, response):
            raise EngineUnavailable("connection refused")

        def close(self):
            pass

    down = make_settings(
        migrated_db, eval_interval_s=60, eval_share=1.0, monitor_backlog_intervals=5
    )
    assert run_evaluate_job(down, factory, NOW, judge=DownJudge()).engine_down
    assert "the evaluate job is 60 min behind" in _open(factory, BACKLOG)["job=evaluate"].summary
    nothing_to_judge = make_settings(
        migrated_db, eval_interval_s=60, eval_share=0.0, monitor_backlog_intervals=5
    )
    assert run_evaluate_job(nothing_to_judge, factory, NOW, judge=DownJudge()).scanned == 3
    assert _open(factory, BACKLOG) == {}


def test_dead_letters_alert_until_a_delivery_succeeds(migrated_db, make_settings):
    settings = make_settings(
        migrated_db, webhook_targets=["http://hooks.test/a"], delivery_max_attempts=1
    )
    factory = session_factory(migrated_db)
    with factory() as s:
        raise_alerts(
            s,
            [
                {
                    "severity": "high",
                    "rule": "latency_psi",
                    "kind": "operational",
                    "segment": "*",
                    "summary": "slow",
                    "evidence": {},
                }
            ],
            run_id=None,
            now=NOW,
            settings=settings,
        )
        s.commit()
    status = {"code": 500}
    client = httpx.Client(
        transport=httpx.MockTransport(
            lambda request: httpx.Response(status["code"], stream=httpx.ByteStream(b"ok"))
        )
    )
    worker = DeliveryWorker(factory, settings=settings, client=client)
    assert worker.run_once().dead == 1
    [alert] = _open(factory, DEAD_LETTERS).values()
    assert alert.kind == "monitoring" and "dead-lettered" in alert.summary
    assert worker.run_once().dead == 1  # its own notification dies too: still one alert
    assert len(_open(factory, DEAD_LETTERS)) == 1
    status["code"] = 200
    with factory() as s:  # a fresh notification, now deliverable
        raise_alerts(
            s,
            [
                {
                    "severity": "high",
                    "rule": "monitor_backlog",
                    "kind": "monitoring",
                    "segment": "embed",
                    "summary": "behind",
                    "evidence": {},
                }
            ],
            run_id=None,
            now=NOW,
            settings=settings,
        )
        s.commit()
    assert worker.run_once().delivered >= 1
    assert _open(factory, DEAD_LETTERS) == {}


def test_stalled_jobs_alert_per_job_and_resolve_when_they_run(migrated_db, make_settings):
    settings = make_settings(migrated_db, monitor_stall_intervals=3)
    factory = session_factory(migrated_db)
    jobs = [ScheduledJob("drift", 3600.0), ScheduledJob("embed", 60.0)]
    record_job_run(factory, "embed", NOW - timedelta(seconds=30))
    with factory() as s:  # this replica has led for 4 hours; drift never ran in that time
        assert check_jobs(s, settings, jobs, leader_since=NOW - timedelta(hours=4), now=NOW) == [
            "drift"
        ]
        s.commit()
    stalled = _open(factory, STALLED)
    assert (
        set(stalled) == {"job=drift"}
        and "drift job has not run for 240 min" in stalled["job=drift"].summary
    )
    with factory() as s:  # a new leader is not blamed for its predecessor's silence
        assert check_jobs(s, settings, jobs, leader_since=NOW - timedelta(minutes=5), now=NOW) == []
        s.commit()
    assert _open(factory, STALLED) == {}


def test_no_stall_while_a_job_runs_within_its_own_timeout(migrated_db, make_settings):
    """An embed job working through a backlog for 95 s with a 15 s interval is not a stall, nor
    are the jobs queued behind it; past its own timeout it is."""
    settings = make_settings(migrated_db, monitor_stall_intervals=3)
    factory = session_factory(migrated_db)
    jobs = [ScheduledJob("embed", 15.0, timeout_s=600.0), ScheduledJob("evaluate", 15.0)]
    for job in jobs:
        record_job_run(factory, job.name, NOW - timedelta(seconds=100))
    record_job_start(factory, "embed", NOW - timedelta(seconds=95))
    with factory() as s:
        assert check_jobs(s, settings, jobs, leader_since=NOW - timedelta(hours=1), now=NOW) == []
        s.commit()
    assert _open(factory, STALLED) == {}
    later = NOW + timedelta(seconds=600)  # the embed run is now past its own timeout
    with factory() as s:
        assert check_jobs(s, settings, jobs, leader_since=NOW - timedelta(hours=1), now=later) == [
            "embed",
            "evaluate",
        ]
        s.commit()


def test_lost_leader_alerts_until_a_replica_holds_the_lease(migrated_db, make_settings):
    settings = make_settings(migrated_db, leader_lease_s=30)
    factory = session_factory(migrated_db)
    with factory() as s:
        assert not check_leader(s, settings, lost_at=None)  # nobody ever took the lease
        s.commit()
    assert _open(factory, LEADER_LOST)[("*")].kind == "monitoring"
    with factory() as s:
        assert try_acquire(s, SCHEDULER_LOCK, "replica-a", 30)
        assert check_leader(s, settings, lost_at=None)
        s.commit()
    assert _open(factory, LEADER_LOST) == {}
    with factory() as s:  # the lease ran out 10 s ago: within the grace unless we just lost it
        s.execute(update(JobLock).values(expires_at=db_now(s) - timedelta(seconds=10)))
        s.commit()
        assert check_leader(s, settings, lost_at=None)
        assert not check_leader(s, settings, lost_at=NOW)
        s.commit()
    assert set(_open(factory, LEADER_LOST)) == {"*"}


def test_backlog_sentence_says_minutes_behind_and_time_to_catch_up():
    from sidecar.backlog import backlog_summary

    assert backlog_summary("embed", 42 * 60, 600, 9.4 * 60) == (
        "the embed job is 42 min behind: the oldest sample a drift window reads without a vector "
        "arrived 42 min ago (limit 10 min); at its last run's pace it needs about 9 min more to "
        "catch up; drift windows run on the rows embedded so far"
    )
    assert "catch up" not in backlog_summary("evaluate", 3600, 300, None)


def test_metrics_say_how_many_minutes_the_read_rows_wait(migrated_db, make_settings, monkeypatch):
    from fastapi.testclient import TestClient
    from sidecar_servers import API_KEY

    from sidecar.app import create_app

    settings = make_settings(migrated_db, embed_interval_s=60)
    factory = session_factory(migrated_db)
    now = datetime.now(UTC)
    _samples(factory, 4, now - timedelta(minutes=30), at=now - timedelta(hours=1))
    monkeypatch.setattr(embed_job, "MAX_BATCHES_PER_RUN", 0)
    embed_job.run_embed_job(settings, factory, now)
    text = (
        TestClient(create_app(settings, factory))
        .get("/metrics", headers={"Authorization": f"Bearer {API_KEY}"})
        .text
    )
    [line] = [ln for ln in text.splitlines() if ln.startswith('vigil_backlog_minutes{job="embed"}')]
    assert 29.5 < float(line.split()[-1]) < 35
