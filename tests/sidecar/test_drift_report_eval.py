"""The drift job draws the eval-score trend from the trailing days it tested, not only from the
hour's own scores (SQLite and PostgreSQL)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from traffic_gen import traffic

import sidecar.jobs.baselines as baselines
import sidecar.jobs.drift as drift_job
from sidecar.jobs.embed import EmbedResult
from storage.db import session_factory
from storage.repositories.samples import insert_samples

HOUR = timedelta(hours=1)
NOW = datetime(2026, 11, 30, 12, 0, 30, tzinfo=UTC)


@pytest.fixture
def world(migrated_db, make_settings, monkeypatch):
    monkeypatch.setattr(drift_job, "run_embed_job", lambda *a, **k: None)  # no model needed
    monkeypatch.setattr(baselines, "run_embed_job", lambda *a, **k: EmbedResult(0, 0))
    return make_settings(migrated_db, drift_interval_s=3600), session_factory(migrated_db)


def scored(records: list[dict], score: float) -> list[dict]:
    return [{**r, "eval_judge": score} for r in records]


def test_the_report_draws_the_week_of_eval_scores(world):
    settings, factory = world
    base_end = NOW - 2 * HOUR
    with factory() as s:
        insert_samples(s, scored(traffic(base_end - 3 * HOUR, base_end, 200, seed=3), 4.5))
        # one scored sample a day for the five days before, and the window's hour
        insert_samples(
            s,
            [
                r
                for day in range(1, 6)
                for r in scored(
                    traffic(NOW - day * 24 * HOUR - HOUR, NOW - day * 24 * HOUR, 1, seed=10 + day),
                    4.0 - day / 10,
                )
            ],
        )
        insert_samples(s, scored(traffic(NOW - HOUR, NOW - timedelta(seconds=30), 40, seed=5), 3.9))
        s.commit()
    built = baselines.build_baseline_from_window(
        settings, factory, base_end - 3 * HOUR, base_end, now=base_end
    )
    assert baselines.validate_stored_baseline(
        settings, factory, built.baseline_id, now=base_end
    ).valid
    baselines.activate_baseline(factory, built.baseline_id, now=base_end)

    [outcome] = drift_job.run_drift_job(settings, factory, NOW).windows
    html = Path(outcome.report_path).read_text()
    section = html.split("<h2>Eval score trend</h2>")[1].split("<h2>")[0]
    assert section.count("<svg") == 1
    days = re.findall(r"<title>day to [\d-]+ 12:00: ([\d.]+) \(n=(\d+)\)</title>", section)
    # the last day holds the window's 40 scores and the baseline's 200 from earlier today
    assert days == [
        ("3.5", "1"),
        ("3.6", "1"),
        ("3.7", "1"),
        ("3.8", "1"),
        ("3.9", "1"),
        ("4.4", "240"),
    ]
    assert 'class="baseline"' in section and 'class="drift-level"' in section
