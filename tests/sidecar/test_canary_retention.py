"""Retention of canary runs (SQLite and PostgreSQL): runs older than canary_retention_days go with
their probe results, recent ones stay, the newest compared run stays whatever its age, and the
readers (the run listing, the sidecar's /metrics canary gauges) still work afterwards. Retired
canary baselines older than that go once no kept run references them; the active one stays."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sidecar_servers import API_KEY
from sqlalchemy import func, select

from sidecar.app import create_app
from sidecar.jobs.retention import run_retention_job
from storage.db import session_factory
from storage.models import CanaryBaseline, CanaryResult, CanaryRun
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
    run = start_canary_run(
        session, baseline_id=baseline_id, model_version="m1", engine=None, now=started
    )
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
    return {
        f"{s.name}{{{s.labels.get('probe', '')}}}": s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
        if s.name.startswith("vigil_canary_")
    }


def test_old_canary_runs_go_with_their_results_recent_ones_stay(migrated_db, make_settings):
    # samples are kept a year here: the canary period is its own setting
    settings = make_settings(migrated_db, retention_days=365, canary_retention_days=30)
    factory = session_factory(migrated_db)
    with factory() as s:
        base = _baseline(s, NOW - timedelta(days=60))
        old = [
            _run(s, base, NOW - timedelta(days=d, minutes=15 * i), "ok", 1.0)
            for d in (45, 31)
            for i in range(4)
        ]
        recent = [
            _run(s, base, NOW - timedelta(days=d), status, 0.5)
            for d, status in ((29, "ok"), (2, "failed"), (1, "mismatch"), (0, "calibration"))
        ]
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
        assert (
            s.scalar(
                select(func.count())
                .select_from(CanaryResult)
                .where(CanaryResult.run_id.in_((older, failed)))
            )
            == 0
        )
    assert _gauges(migrated_db, settings)["vigil_canary_token_match_ratio{chat}"] == 0.75


def _kept_baselines(session) -> tuple[set[int], set[int], set[int]]:
    """(baseline ids, active ids, ids referenced by a canary run)."""
    ids = set(session.scalars(select(CanaryBaseline.id)))
    active = set(
        session.scalars(select(CanaryBaseline.id).where(CanaryBaseline.status == "active"))
    )
    used = set(
        session.scalars(select(CanaryRun.baseline_id).where(CanaryRun.baseline_id.is_not(None)))
    )
    return ids, active, used


def test_retired_baselines_go_once_no_kept_run_references_them(migrated_db, make_settings):
    """A calibration every 9 days and a compared run every day for 100 simulated days, retention
    daily: each day exactly the active baseline, those a kept run references and those created
    within the period remain."""
    settings = make_settings(migrated_db, canary_retention_days=30)
    factory = session_factory(migrated_db)
    start, created, results = NOW - timedelta(days=100), {}, []
    for day in range(100):
        today = start + timedelta(days=day)
        with factory() as s:
            if day % 9 == 0:  # a calibration fixes a new baseline and retires the previous one
                base = _baseline(s, today)
                created[base] = today
                _run(s, base, today, "calibration", 1.0)
            _run(s, base, today + timedelta(hours=1), "ok" if day % 4 else "mismatch", 1.0)
            s.commit()
        result = run_retention_job(settings, factory, today + timedelta(hours=2))
        cutoff = today + timedelta(hours=2) - timedelta(days=30)
        with factory() as s:
            ids, active, used = _kept_baselines(s)
        assert active == {base}
        assert ids == {b for b, at in created.items() if b == base or b in used or at >= cutoff}, (
            day
        )
        results.append(result)
    deleted = sum(r.canary_baselines for r in results)
    assert deleted == len(created) - len(ids) and deleted >= 5  # the early ones went
    assert min(ids) > min(created)


def test_idle_canaries_keep_the_active_baseline_and_the_one_the_gauges_read(
    migrated_db, make_settings
):
    settings = make_settings(migrated_db, canary_retention_days=30)
    factory = session_factory(migrated_db)
    with factory() as s:
        read = _baseline(s, NOW - timedelta(days=200))
        _run(s, read, NOW - timedelta(days=200), "calibration", 1.0)
        _run(s, read, NOW - timedelta(days=190), "mismatch", 0.5)  # the newest compared run
        spent = _baseline(s, NOW - timedelta(days=180))
        _run(s, spent, NOW - timedelta(days=180), "calibration", 1.0)
        _run(s, spent, NOW - timedelta(days=175), "failed", 0.0)  # engine down since
        active = _baseline(s, NOW - timedelta(days=170))  # no run at all
        s.commit()
    result = run_retention_job(settings, factory, NOW)
    with factory() as s:
        assert _kept_baselines(s) == ({read, active}, {active}, {read})
        assert s.get(CanaryBaseline, spent) is None
    assert (result.canary_runs, result.canary_baselines) == (3, 1)
    assert _gauges(migrated_db, settings)["vigil_canary_token_match_ratio{chat}"] == 0.5
    assert run_retention_job(settings, factory, NOW).canary_baselines == 0  # idempotent
