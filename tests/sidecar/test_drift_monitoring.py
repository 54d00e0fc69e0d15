"""The drift job watches itself (SQLite and PostgreSQL): a window that kills the job is counted at
claim and given up after MAX_ATTEMPTS with a `monitoring` alert; a failing window and a window
without an active valid baseline raise `monitoring` alerts that resolve once a window runs clean."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from traffic_gen import traffic

import sidecar.jobs.baselines as baselines
import sidecar.jobs.drift as drift_job
from sidecar.cursors import get_cursor
from sidecar.jobs.drift_health import NO_BASELINE
from sidecar.jobs.embed import EmbedResult
from storage.db import session_factory
from storage.models import Alert, DriftRun
from storage.repositories.samples import insert_samples

HOUR = timedelta(hours=1)
NOW = datetime(2026, 11, 30, 12, 0, 30, tzinfo=UTC)  # 30 s after the 11:00-12:00 window closed


class Killed(BaseException):
    """Stands in for SIGKILL / the OOM killer: nothing in the job may catch it."""


@pytest.fixture
def world(migrated_db, make_settings, monkeypatch):
    monkeypatch.setattr(drift_job, "run_embed_job", lambda *a, **k: None)  # no model needed
    monkeypatch.setattr(baselines, "run_embed_job", lambda *a, **k: EmbedResult(0, 0))
    settings = make_settings(
        migrated_db, drift_interval_s=3600, webhook_targets=["http://127.0.0.1:9/h"]
    )
    return settings, session_factory(migrated_db)


def _alerts(factory, rule: str) -> list[Alert]:
    with factory() as s:
        return list(s.scalars(select(Alert).where(Alert.rule == rule).order_by(Alert.id)))


def _valid_baseline(settings, factory, end: datetime) -> int:
    with factory() as s:
        insert_samples(s, traffic(end - 3 * HOUR, end, 200, seed=3))
        s.commit()
    built = baselines.build_baseline_from_window(settings, factory, end - 3 * HOUR, end, now=end)
    checked = baselines.validate_stored_baseline(settings, factory, built.baseline_id, now=end)
    assert checked.valid, checked.reasons
    baselines.activate_baseline(factory, built.baseline_id, now=end)
    return built.baseline_id


def test_a_window_that_kills_the_job_is_given_up_with_an_alert(world, monkeypatch):
    settings, factory = world
    fetched = []

    def dies(*_a, **_k):
        fetched.append(1)
        raise Killed()

    monkeypatch.setattr(drift_job, "read_window", dies)
    for attempt in range(1, drift_job.MAX_ATTEMPTS + 1):
        with pytest.raises(Killed):
            drift_job.run_drift_job(settings, factory, NOW)
        with factory() as s:
            run = s.scalars(select(DriftRun)).one()
            assert run.status == "running" and run.attempts == attempt  # counted at claim
    assert (
        len(fetched) == drift_job.MAX_ATTEMPTS and _alerts(factory, drift_job.WINDOW_FAILED) == []
    )

    outcome = drift_job.run_drift_job(settings, factory, NOW).windows
    assert [o.status for o in outcome] == ["gave_up"]
    assert len(fetched) == drift_job.MAX_ATTEMPTS  # not claimed for work again
    [alert] = _alerts(factory, drift_job.WINDOW_FAILED)
    assert alert.kind == "monitoring" and alert.status == "open" and alert.severity == "high"
    assert alert.evidence["given_up"] and alert.evidence["attempts"] == drift_job.MAX_ATTEMPTS
    with factory() as s:
        run = s.scalars(select(DriftRun)).one()
        assert run.status == "skipped" and run.attempts == drift_job.MAX_ATTEMPTS
        assert get_cursor(s, drift_job.CURSOR) == outcome[0].window_end.isoformat()
    assert drift_job.run_drift_job(settings, factory, NOW).windows == []  # nothing left due


def test_failures_and_a_missing_baseline_alert_until_a_window_runs_clean(world, monkeypatch):
    settings, factory = world
    real_fetch = drift_job.read_window

    def broken(*_a, **_k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(drift_job, "read_window", broken)
    with pytest.raises(RuntimeError):
        drift_job.run_drift_job(settings, factory, NOW)
    [failed] = _alerts(factory, drift_job.WINDOW_FAILED)
    assert (
        failed.status == "open" and failed.kind == "monitoring" and not failed.evidence["given_up"]
    )
    assert "disk on fire" in failed.summary and "1 of 3" in failed.summary

    monkeypatch.setattr(drift_job, "read_window", real_fetch)
    with factory() as s:  # the window has traffic but there is no baseline to compare it with
        insert_samples(s, traffic(NOW - HOUR, NOW - timedelta(seconds=30), 40, seed=5))
        s.commit()
    assert [o.status for o in drift_job.run_drift_job(settings, factory, NOW).windows] == ["done"]
    [no_base] = _alerts(factory, NO_BASELINE)
    assert (
        no_base.status == "open"
        and no_base.kind == "monitoring"
        and "no active baseline" in no_base.summary
    )
    assert _alerts(factory, drift_job.WINDOW_FAILED)[0].status == "resolved"  # the job ran clean

    _valid_baseline(settings, factory, NOW - HOUR)
    later = NOW + HOUR
    with factory() as s:
        insert_samples(s, traffic(NOW, later - timedelta(seconds=60), 60, seed=6))
        s.commit()
    assert [o.status for o in drift_job.run_drift_job(settings, factory, later).windows] == ["done"]
    assert [a.status for a in _alerts(factory, NO_BASELINE)] == ["resolved"]


def test_unreadable_input_is_given_up_at_once(world, monkeypatch):
    from drift.errors import InputError

    settings, factory = world

    def unreadable(*_a, **_k):
        raise InputError("row 3: prompt_embedding has 5 values, row 0 has 384")

    monkeypatch.setattr(drift_job, "read_window", unreadable)
    outcome = drift_job.run_drift_job(settings, factory, NOW).windows  # no retry can help
    assert [o.status for o in outcome] == ["failed"]
    [alert] = _alerts(factory, drift_job.WINDOW_FAILED)
    assert alert.evidence["given_up"] and "row 3" in alert.summary
