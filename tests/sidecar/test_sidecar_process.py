"""`vigil sidecar` as real subprocesses: SIGKILL in the middle of the drift job, then restart
(SQLite and PostgreSQL); two replicas on one PostgreSQL run the periodic job once per interval."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sidecar_servers import OPERATOR_KEY, SidecarProcess, WebhookReceiver, sidecar_env
from sidecar_world import prepare
from sqlalchemy import func, select
from traffic_gen import traffic

from alerts.signing import IDEMPOTENCY_HEADER, verify
from storage.db import session_factory
from storage.models import Alert, Delivery, DriftRun, Sample

SECRET = "sigkill-webhook-secret-0123456789"


def wait_for(predicate, timeout: float, what: str, poll: float = 0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def counts(factory) -> dict[str, int]:
    with factory() as s:
        return {m.__tablename__: s.scalar(select(func.count()).select_from(m))
                for m in (Sample, DriftRun, Alert, Delivery)}  # fmt: skip


def test_sigkill_mid_drift_job_then_restart(migrated_db, make_settings, embedder, tmp_path):
    with WebhookReceiver() as receiver:
        settings = make_settings(migrated_db, webhook_targets=[receiver.url], webhook_secret=SECRET)
        factory = session_factory(migrated_db)
        world = prepare(settings, factory, None)  # samples, embeddings, active baseline
        before = counts(factory)
        env = sidecar_env(
            migrated_db, tmp_path / "reports", VIGIL_WEBHOOK_TARGETS=json.dumps([receiver.url]),
            VIGIL_WEBHOOK_SECRET=SECRET, VIGIL_EVAL_SHARE="0", VIGIL_DELIVERY_POLL_INTERVAL_S="0.2",
        )  # fmt: skip

        first = SidecarProcess(env, tmp_path / "first.log")
        try:

            def running():
                with factory() as s:
                    return s.scalars(select(DriftRun).where(DriftRun.status == "running")).first()

            run = wait_for(running, 120, "the drift job to claim its window")
            first.freeze()  # SIGSTOP: pins the process mid-job, so the kill lands mid-job
            with factory() as s:
                killed = s.get(DriftRun, run.id)
                assert killed.status == "running", (
                    "the job finished before the freeze: test is moot"
                )
        finally:
            first.kill()  # SIGKILL: no cleanup, the lease stays until it expires
        mid = counts(factory)
        assert mid == {**before, "drift_runs": 1}  # no alert, no delivery, no sample lost
        assert receiver.received == []

        second = SidecarProcess(env, tmp_path / "second.log")
        try:

            def done():
                with factory() as s:
                    row = s.get(DriftRun, run.id)
                    s.expire_all()
                    return row is not None and row.status == "done"

            wait_for(done, 120, "the restarted sidecar to finish the window", poll=0.2)
            with factory() as s:
                n_groups = len(
                    {a.incident_id for a in s.scalars(select(Alert))}
                )  # one webhook per incident
            assert n_groups > 0
            wait_for(lambda: len(receiver.received) >= n_groups, 60, "the webhooks", poll=0.2)
            time.sleep(1.0)  # a duplicate would arrive now
            health = second.wait_healthy()
            # samples the ingest API acknowledged survive a SIGKILL right after the 200
            late = traffic(datetime.now(UTC), datetime.now(UTC) + timedelta(seconds=1), 5, seed=99)
            ack = httpx.post(
                f"{second.url}/v1/ingest",
                json={"samples": late},
                headers={"Authorization": f"Bearer {OPERATOR_KEY}"},
                timeout=10,
            )
            assert ack.status_code == 200 and ack.json()["inserted"] == 5
        finally:
            second.kill()
        assert health["leader"] is True
        after = counts(factory)
        assert after["samples"] == before["samples"] + 5  # nothing lost (nor invented)
        with factory() as s:
            assert {r["id"] for r in late} <= set(s.scalars(select(Sample.id)))
        assert after["drift_runs"] == 1  # the killed attempt was resumed, not duplicated
        with factory() as s:
            alerts = list(s.scalars(select(Alert)))
            finished = s.get(DriftRun, run.id)
        assert len({(a.rule, a.segment) for a in alerts}) == len(alerts)  # no duplicate alert
        assert all(a.occurrences == 1 and a.run_id == run.id for a in alerts)
        assert (finished.window_start, finished.window_end) == world.window
        assert finished.num_samples == len(world.drift_records)
        keys = [h[IDEMPOTENCY_HEADER] for _p, h, _b in receiver.received]
        # each incident delivered exactly once, its members naming every alert
        assert len(keys) == len(set(keys)) == len({a.incident_id for a in alerts})
        bodies = [json.loads(raw) for _p, _h, raw in receiver.received]
        named = {
            (m["rule"], m["segment"])
            for b in bodies
            for m in (b.get("incident", {}).get("members") or [b["alert"]])
        }
        assert named == {(a.rule, a.segment) for a in alerts}
        for _path, headers, raw in receiver.received:
            verify(raw, headers, SECRET)
        assert "drift run" in second.log() and "claimed" in second.log()


def test_two_sidecars_run_the_periodic_job_once_per_interval(pg_url, tmp_path):
    interval = 2
    env = sidecar_env(pg_url, tmp_path / "reports", VIGIL_DRIFT_INTERVAL_S=str(interval),
                      VIGIL_EVAL_SHARE="0", VIGIL_LEADER_LEASE_S="5")  # fmt: skip
    a = SidecarProcess(env, tmp_path / "a.log")
    b = SidecarProcess(env, tmp_path / "b.log")
    factory = session_factory(pg_url)
    try:
        a.wait_healthy()
        b.wait_healthy()

        def runs():
            with factory() as s:
                return list(
                    s.scalars(
                        select(DriftRun)
                        .where(DriftRun.status == "done")
                        .order_by(DriftRun.window_start)
                    )
                )

        wait_for(lambda: len(runs()) >= 4, 60, "four drift windows", poll=0.2)
        leaders = [p for p in (a, b) if "job drift started" in p.log()]
        assert len(leaders) == 1, "both replicas ran the drift job"
        leader, standby = leaders[0], (b if leaders[0] is a else a)
        n_before = len(runs())
        leader.kill()  # the standby takes over once the 5 s lease expires
        wait_for(lambda: len(runs()) >= n_before + 3, 60, "the standby to take over", poll=0.2)
        assert "job drift started" in standby.log()
        assert standby.stop() == 0  # SIGTERM: a clean exit (lease released, jobs stopped)
        assert "sidecar" in standby.log() and "stopped" in standby.log()
    finally:
        for p in (a, b):
            if p.proc.poll() is None:
                p.stop()
    done = runs()
    starts = [r.window_start for r in done]
    # every interval exactly once: contiguous windows of `interval` seconds, none twice, no gap
    assert len(starts) == len(set(starts))
    for prev, cur in zip(done, done[1:], strict=False):
        assert (cur.window_start - prev.window_start).total_seconds() == interval
        assert (cur.window_end - cur.window_start).total_seconds() == interval
    claims = re.findall(r"drift run (\d+) claimed", a.log() + b.log())
    assert len(claims) == len(set(claims)) >= len(done)  # no window was worked twice
    assert done[-1].window_end <= datetime.now(UTC)


# starts real OS processes: left out by make test-fast
pytestmark = pytest.mark.processes
