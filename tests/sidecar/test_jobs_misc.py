"""Retention, the baseline refresh reminder, the baseline life cycle through `vigil baseline`,
and `vigil report --hours` (SQLite and PostgreSQL)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select
from traffic_gen import traffic

from sidecar.jobs.baseline_reminder import RULE, run_baseline_reminder_job
from sidecar.jobs.embed import run_embed_job
from sidecar.jobs.retention import run_retention_job
from storage.db import session_factory
from storage.models import Alert, Baseline, BaselineSample, Delivery, Embedding, Sample
from storage.repositories.baselines import (
    add_baseline_samples,
    create_baseline,
    set_baseline_status,
)
from storage.repositories.samples import fetch_window, insert_samples
from vigil.cli.baseline import baseline_command
from vigil.cli.report import report_command
from vigil.config import get_settings

NOW = datetime.now(UTC)


def test_retention_deletes_old_samples_but_not_frozen_baselines(
    migrated_db, make_settings, embedder
):
    settings = make_settings(migrated_db, retention_days=30)
    factory = session_factory(migrated_db)
    old = traffic(NOW - timedelta(days=45), NOW - timedelta(days=40), 20, seed=1)
    new = traffic(NOW - timedelta(days=2), NOW - timedelta(days=1), 15, seed=2)
    with factory() as s:
        insert_samples(s, old + new)
        s.commit()
    run_embed_job(settings, factory, NOW)
    with factory() as s:
        b = create_baseline(s, "old", NOW - timedelta(days=45), NOW - timedelta(days=40), now=NOW)
        add_baseline_samples(
            s, b.id, fetch_window(s, NOW - timedelta(days=46), NOW - timedelta(days=39))
        )
        s.commit()
    result = run_retention_job(settings, factory, NOW)
    assert result.deleted == len(old)
    with factory() as s:
        left = set(s.scalars(select(Sample.id)))
        assert left == {r["id"] for r in new}
        assert s.scalar(select(func.count()).select_from(Embedding)) == 2 * len(new)  # cascaded
        assert s.scalar(select(func.count()).select_from(BaselineSample)) == len(old)  # kept
    assert run_retention_job(settings, factory, NOW).deleted == 0  # idempotent


def _active_baseline(factory, activated: datetime) -> int:
    with factory() as s:
        b = create_baseline(s, "b", activated - timedelta(days=1), activated, now=activated)
        set_baseline_status(s, b.id, "validated", now=activated)
        set_baseline_status(s, b.id, "active", now=activated)
        s.commit()
        return b.id


def test_baseline_reminder_alerts_once_and_resolves(migrated_db, make_settings, tmp_path):
    # a review notice reaches ticket targets only by default (no page for a reminder)
    rules = tmp_path / "rules.yaml"
    rules.write_text('targets: {tickets: {url: "http://127.0.0.1:9/tickets", type: ticket}}\n')
    settings = make_settings(
        migrated_db,
        baseline_max_age_days=90,
        webhook_targets=["http://127.0.0.1:9/hook"],
        alert_rules_path=rules,
    )
    factory = session_factory(migrated_db)
    assert run_baseline_reminder_job(settings, factory, NOW).reminded is False  # no baseline yet
    _active_baseline(factory, NOW - timedelta(days=100))
    first = run_baseline_reminder_job(settings, factory, NOW)
    second = run_baseline_reminder_job(settings, factory, NOW + timedelta(minutes=5))
    assert first.reminded and second.reminded and first.age_days == pytest.approx(100, abs=0.01)
    with factory() as s:
        alerts = list(s.scalars(select(Alert)))
        deliveries = s.scalar(select(func.count()).select_from(Delivery))
    assert len(alerts) == 1 and alerts[0].rule == RULE and alerts[0].status == "open"
    assert alerts[0].severity == "review" and alerts[0].kind == "operational"
    assert deliveries == 1  # deduped, to the ticket target only (not the paging /hook)
    with factory() as s:
        assert s.scalars(select(Delivery.target)).one() == "http://127.0.0.1:9/tickets"
    _active_baseline(factory, NOW)  # a fresh baseline replaces the old one
    done = run_baseline_reminder_job(settings, factory, NOW + timedelta(minutes=10))
    assert not done.reminded and done.resolved == 1
    with factory() as s:
        assert s.scalars(select(Alert)).one().status == "resolved"


def _args(**kw) -> argparse.Namespace:
    base = {"action": "list", "start": None, "end": None, "id": None, "name": None}
    return argparse.Namespace(**{**base, **kw})


@pytest.fixture
def cli_env(migrated_db, tmp_path, monkeypatch, embedder):
    monkeypatch.setenv("VIGIL_DATABASE_URL", migrated_db)
    monkeypatch.setenv("VIGIL_REPORT_DIR", str(tmp_path / "reports"))
    get_settings.cache_clear()
    yield session_factory(migrated_db)
    get_settings.cache_clear()


# a whole pipeline on one backend; the storage tests cover both
@pytest.mark.parametrize("migrated_db", ["sqlite"], indirect=True)
def test_baseline_cli_life_cycle(cli_env, capsys):
    factory = cli_env
    start = NOW - timedelta(hours=6)
    steady = traffic(start, start + timedelta(hours=2), 160, seed=4)
    # a window whose second half brings a new topic: validation must reject it
    drifting = traffic(
        start + timedelta(hours=3), start + timedelta(hours=4), 80, seed=5
    ) + traffic(
        start + timedelta(hours=4), start + timedelta(hours=5), 80, seed=6, new_topic_share=0.6
    )
    with factory() as s:
        insert_samples(s, steady + drifting)
        s.commit()
    iso = lambda t: t.isoformat()  # noqa: E731
    assert (
        baseline_command(
            _args(action="build", start=iso(start), end=iso(start + timedelta(hours=2)))
        )
        == 0
    )
    assert "baseline 1 built (candidate): 160 samples" in capsys.readouterr().out
    assert baseline_command(_args(action="activate", id=1)) == 2  # a candidate cannot be activated
    assert "only a validated baseline can be activated" in capsys.readouterr().err
    assert baseline_command(_args(action="validate", id=1)) == 0
    assert "validated" in capsys.readouterr().out
    assert baseline_command(_args(action="activate", id=1)) == 0

    window = (start + timedelta(hours=3), start + timedelta(hours=5))
    assert baseline_command(_args(action="build", start=iso(window[0]), end=iso(window[1]))) == 0
    assert baseline_command(_args(action="validate", id=2)) == 1
    assert "rejected" in capsys.readouterr().err
    assert baseline_command(_args(action="activate", id=2)) == 2
    assert baseline_command(_args(action="list")) == 0
    listing = capsys.readouterr().out
    assert "active" in listing and "rejected" in listing
    with factory() as s:
        assert {b.id: b.status for b in s.scalars(select(Baseline))} == {1: "active", 2: "rejected"}
    assert baseline_command(_args(action="build", start="yesterday", end=iso(NOW))) == 2
    assert "RFC 3339" in capsys.readouterr().err

    # `vigil report --hours 7`: the drift job on the last 7 hours, against baseline 1
    assert report_command(argparse.Namespace(hours=7.0)) == 0
    path = Path(capsys.readouterr().out.strip())
    assert path.is_file() and path.stat().st_size <= 5 * 1024 * 1024
    html = path.read_text()
    assert "Vigil drift report" in html and "Baseline #1" in html and "320 samples" in html
    assert report_command(argparse.Namespace(hours=-1)) == 2


def test_a_failing_window_is_retried_then_skipped(migrated_db, make_settings, monkeypatch):
    import sidecar.jobs.drift as drift_job
    from sidecar.cursors import get_cursor
    from storage.models import DriftRun

    settings = make_settings(migrated_db, drift_interval_s=3600)
    factory = session_factory(migrated_db)

    def broken(*_a, **_k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(drift_job, "read_window", broken)
    for _ in range(drift_job.MAX_ATTEMPTS - 1):
        with pytest.raises(RuntimeError, match="disk on fire"):
            drift_job.run_drift_job(settings, factory, NOW)
        with factory() as s:
            run = s.scalars(select(DriftRun)).one()
            assert run.status == "failed" and "disk on fire" in run.summary["error"]
            assert get_cursor(s, drift_job.CURSOR) is None  # the window stays due
    outcome = drift_job.run_drift_job(settings, factory, NOW).windows
    assert [o.status for o in outcome] == ["failed"]  # third strike: skipped, not blocking
    with factory() as s:
        assert get_cursor(s, drift_job.CURSOR) == outcome[0].window_end.isoformat()
    monkeypatch.undo()
    assert drift_job.run_drift_job(settings, factory, NOW).windows == []  # nothing left due
