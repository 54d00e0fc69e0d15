"""Retention covers everything holding prompts or alert context: old samples, the frozen copies
of spent baselines, old HTML reports, dead-letter and corrupt-line files (SQLite and
PostgreSQL). Pending journal segments and baselines still in use are kept."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select

from sidecar.jobs.retention import run_retention_job
from storage.db import session_factory
from storage.models import Baseline, BaselineSample

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
OLD, RECENT = NOW - timedelta(days=60), NOW - timedelta(days=1)


def _baseline(session, status: str, created: datetime) -> int:
    b = Baseline(
        name=status, status=status, created_at=created, window_start=created, window_end=created
    )
    session.add(b)
    session.flush()
    session.add_all(
        BaselineSample(baseline_id=b.id, sample_id=f"{b.id}-{i}", record={"prompt": "secret"})
        for i in range(3)
    )
    return b.id


def _file(path, mtime: datetime):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x")
    os.utime(path, (mtime.timestamp(), mtime.timestamp()))
    return path


def test_retention_reaches_reports_baselines_and_side_files(migrated_db, make_settings, tmp_path):
    """Was: only samples expired; reports, frozen baseline prompts, dead-letter and corrupt-line
    files were kept forever."""
    settings = make_settings(migrated_db, retention_days=30)
    factory = session_factory(migrated_db)
    with factory() as s:
        spent_old = _baseline(s, "retired", OLD)
        rejected_old = _baseline(s, "rejected", OLD)
        active_old = _baseline(s, "active", OLD)
        spent_recent = _baseline(s, "retired", RECENT)
        s.commit()
    reports, journal = settings.report_dir, settings.journal_dir
    old_report, new_report = (
        _file(reports / "run-1.html", OLD),
        _file(reports / "run-2.html", RECENT),
    )
    dead = _file(journal / "dead-letter.jsonl", OLD)
    corrupt = _file(journal / "corrupt-123.txt", OLD)
    segment = _file(journal / "00000000000000000001-1-000000.jsonl", OLD)  # pending data
    result = run_retention_job(settings, factory, NOW)
    with factory() as s:
        left = dict(
            s.execute(
                select(BaselineSample.baseline_id, func.count()).group_by(
                    BaselineSample.baseline_id
                )
            ).all()
        )
    assert (
        left == {active_old: 3, spent_recent: 3}
        and spent_old not in left
        and rejected_old not in left
    )
    assert result.baseline_samples == 6 and result.files == 3
    assert not old_report.exists() and not dead.exists() and not corrupt.exists()
    assert new_report.exists() and segment.exists()
