"""A report that cannot be written costs the drift run nothing: its results and alerts are
committed, the run is done, and the failure is its own `monitor_report_failed` alert, resolved
by the next report written (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hash_embedder import HashEmbedder
from sqlalchemy import select
from traffic_gen import traffic

import sidecar.jobs.baselines as baselines
import sidecar.jobs.drift as drift_job
import sidecar.jobs.embed as embed_job
from storage.db import session_factory
from storage.models import Alert, DriftResult, DriftRun
from storage.repositories.samples import insert_samples

HOUR = timedelta(hours=1)
NOW = datetime(2026, 11, 30, 12, 0, 30, tzinfo=UTC)


def test_a_report_failure_keeps_the_runs_results_and_alerts(
    migrated_db, make_settings, monkeypatch
):
    settings = make_settings(migrated_db, drift_interval_s=3600)
    factory = session_factory(migrated_db)
    monkeypatch.setattr(
        embed_job, "get_embedder", lambda _p: HashEmbedder(embed_job.model_name(settings))
    )
    base_end = NOW - 2 * HOUR
    window = traffic(NOW - HOUR, NOW - timedelta(seconds=30), 80, seed=5)
    for record in window:
        record["model_version"] = "m2"  # something that alerts
    with factory() as s:
        insert_samples(s, traffic(base_end - 3 * HOUR, base_end, 200, seed=3), now=base_end)
        insert_samples(s, window, now=NOW - timedelta(minutes=1))
        s.commit()
    built = baselines.build_baseline_from_window(
        settings, factory, base_end - 3 * HOUR, base_end, now=base_end
    )
    assert baselines.validate_stored_baseline(
        settings, factory, built.baseline_id, now=base_end
    ).valid
    baselines.activate_baseline(factory, built.baseline_id, now=base_end)

    def crash(**_kw):
        raise RuntimeError("renderer crashed")

    monkeypatch.setattr(drift_job, "write_run_report", crash)
    [outcome] = drift_job.run_drift_job(settings, factory, NOW).windows
    assert outcome.status == "done" and outcome.report_path is None
    with factory() as s:
        run = s.get(DriftRun, outcome.run_id)
        assert run.status == "done" and run.report_path is None
        assert s.scalars(select(DriftResult).where(DriftResult.run_id == run.id)).first()
        alerts = {a.rule: a for a in s.scalars(select(Alert).where(Alert.status == "open"))}
    assert "new_model_version" in alerts  # the drift alert stands
    failed = alerts["monitor_report_failed"]
    assert failed.evidence == {"run_id": run.id, "error": "RuntimeError: renderer crashed"}
    assert "could not be written" in failed.summary and "results and alerts stand" in failed.summary

    monkeypatch.undo()
    monkeypatch.setattr(
        embed_job, "get_embedder", lambda _p: HashEmbedder(embed_job.model_name(settings))
    )
    [later] = drift_job.run_drift_job(settings, factory, NOW + HOUR).windows
    assert later.report_path is not None  # the next report is written and resolves the alert
    with factory() as s:
        assert s.get(Alert, failed.id).status == "resolved"
