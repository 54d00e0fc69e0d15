"""Retention of canary runs (SQLite and PostgreSQL): runs older than canary_retention_days go with
their probe results, recent ones stay, the newest compared run stays whatever its age, and the
readers (the run listing, the sidecar's /metrics canary gauges) still work afterwards."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sidecar_servers import API_KEY
from sqlalchemy import func, select

from sidecar.app import create_app
from sidecar.jobs.retention import run_retention_job
from storage.db import session_factory
from storage.models import CanaryResult, CanaryRun
from storage.repositories.canaries import (
    CanaryResultRow,
    activate_canary_baseline,
    add_canary_results,
    finish_canary_run,
    get_canary_results,
    list_canary_runs,
    start_canary_run,
)

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
PROBES = ("chat", "reference")


def _run(session, baseline_id: int, started: datetime, status: str, match: float) -> int:
    run = start_canary_run(session, baseline_id=baseline_id, model_version="m1", engine=None, now=started)
    add_canary_results(session, run.id, [
        CanaryResultRow(p, [1, 2], "ab" * 32, [-0.1, -0.2], 3.0 if p == "reference" else None,
                        {"token_match_rate": match}, status == "ok") for p in PROBES])  # fmt: skip
    finish_canary_run(session, run, status=status, summary=None, now=started)
    return run.id


def _baseline(session, created: datetime) -> int:
    return activate_canary_baseline(
        session, probe_set_version="v1", model_version="m1", engine=None, expected={},
        tolerances={}, calibration=None, now=created).id  # fmt: skip


def _gauges(url: str, settings) -> dict[str, float]:
    client = TestClient(create_app(settings, session_factory(url)))
    response = client.get("/metrics", headers={"Authorization": f"Bearer {API_KEY}"})
    assert response.status_code == 200
    return {f"{s.name}{{{s.labels.get('probe', '')}}}": s.value
            for family in text_string_to_metric_families(response.text)
            for s in family.samples if s.name.startswith("vigil_canary_")}


def test_old_canary_runs_go_with_their_results_recent_ones_stay(migrated_db, make_settings):
    # samples are kept a year here: the canary period is its own setting
    settings = make_settings(migrated_db, retention_days=365, canary_retention_days=30)
    factory = session_factory(migrated_db)
    with factory() as s:
        base = _baseline(s, NOW - timedelta(days=60))
        old = [_run(s, base, NOW - timedelta(days=d, minutes=15 * i), "ok", 1.0)
               for d in (45, 31) for i in range(4)]
        recent = [_run(s, base, NOW - timedelta(days=d), status, 0.5)
                  for d, status in ((29, "ok"), (2, "failed"), (1, "mismatch"), (0, "calibration"))]
        s.commit()
    result = run_retention_job(settings, factory, NOW)
    assert result.canary_runs == len(old) and result.deleted == 0
    with factory() as s:
        assert {r.id for r in list_canary_runs(s)} == set(recent)
        assert s.scalar(select(func.count()).select_from(CanaryResult)) == len(PROBES) * len(recent)
        assert [r.probe for r in get_canary_results(s, recent[2])] == list(PROBES)
    gauges = _gauges(migrated_db, settings)  # the latest compared run: the mismatch a day ago
    assert gauges["vigil_canary_token_match_ratio{chat}"] == 0.5
    assert gauges["vigil_canary_perplexity{reference}"] == 3.0
    assert run_retention_job(settings, factory, NOW).canary_runs == 0  # idempotent


def test_the_newest_compared_run_stays_whatever_its_age(migrated_db, make_settings):
    settings = make_settings(migrated_db, canary_retention_days=30)
    factory = session_factory(migrated_db)
    with factory() as s:
        base = _baseline(s, NOW - timedelta(days=90))
        older = _run(s, base, NOW - timedelta(days=80), "mismatch", 0.25)
        newest = _run(s, base, NOW - timedelta(days=70), "ok", 0.75)
        failed = _run(s, base, NOW - timedelta(days=40), "failed", 0.0)  # e.g. engine down since
        s.commit()
    assert run_retention_job(settings, factory, NOW).canary_runs == 2
    with factory() as s:
        assert list(s.scalars(select(CanaryRun.id))) == [newest]
        assert len(get_canary_results(s, newest)) == len(PROBES)
        assert s.scalar(select(func.count()).select_from(CanaryResult).where(CanaryResult.run_id.in_((older, failed)))) == 0
    assert _gauges(migrated_db, settings)["vigil_canary_token_match_ratio{chat}"] == 0.75
