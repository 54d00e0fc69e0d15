"""A window whose read rows are not all embedded yet runs on what is embedded and says so, in
the report, the run summary and the alerts it raised (SQLite and PostgreSQL)."""

from __future__ import annotations

import html
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
from hash_embedder import HashEmbedder
from sqlalchemy import select
from traffic_gen import traffic

import sidecar.jobs.baselines as baselines
import sidecar.jobs.drift as drift_job
import sidecar.jobs.embed as embed_job
from sidecar.jobs.coverage import Coverage, vector_coverage
from storage.db import session_factory
from storage.models import Alert, DriftRun
from storage.repositories.samples import insert_samples

HOUR = timedelta(hours=1)
NOW = datetime(2026, 11, 30, 12, 0, 30, tzinfo=UTC)


def test_the_sentence():
    assert Coverage(50_000, 31_000).sentence() == (
        "drift on embeddings computed on 62 % of the window's rows (31,000 of 50,000); the rest "
        "had no vectors yet; the other tests used every row"
    )
    assert Coverage(1000, 996).sentence().startswith("drift on embeddings computed on 99 % ")
    assert (
        Coverage(80, 0)
        .sentence()
        .startswith("drift on embeddings not computed: none of the window's 80")
    )
    assert Coverage(80, 80).sentence() is None and Coverage(0, 0).sentence() is None


def test_coverage_counts_rows_with_text_and_any_vector():
    v = [0.1, 0.2]
    frame = pd.DataFrame(
        {
            "prompt": ["a", "b", "c", None, "e"],
            "response": ["x", None, "z", None, None],
            "prompt_embedding": [v, None, None, None, float("nan")],
            "response_embedding": [v, None, v, None, None],
        }
    )
    assert vector_coverage(frame) == Coverage(rows=4, embedded=2)
    assert vector_coverage(pd.DataFrame()) == Coverage(0, 0)


def test_a_partly_embedded_window_says_how_much_it_covered(migrated_db, make_settings, monkeypatch):
    settings = make_settings(migrated_db, drift_interval_s=3600)
    factory = session_factory(migrated_db)
    monkeypatch.setattr(
        embed_job, "get_embedder", lambda _p: HashEmbedder(embed_job.model_name(settings))
    )
    base_end = NOW - 2 * HOUR
    window = traffic(NOW - HOUR, NOW - timedelta(seconds=30), 80, seed=5)
    for record in window:
        record["model_version"] = "m2"  # something that alerts without embeddings
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

    monkeypatch.setattr(embed_job, "BATCH", 16)
    monkeypatch.setattr(embed_job, "MAX_BATCHES_PER_RUN", 2)  # the embed job lags: 32 of 80
    [outcome] = drift_job.run_drift_job(settings, factory, NOW).windows
    sentence = (
        "drift on embeddings computed on 40 % of the window's rows (32 of 80); the rest had "
        "no vectors yet; the other tests used every row"
    )
    with factory() as s:
        run = s.get(DriftRun, outcome.run_id)
        alerts = {a.rule: a for a in s.scalars(select(Alert))}
    assert run.summary["vectors"] == {
        "rows": 80,
        "embedded": 32,
        "share": 0.4,
        "window_rows": 80,
        "sentence": sentence,
    }
    page = html.unescape(Path(outcome.report_path).read_text())
    assert (
        "<b>Drift on embeddings computed on 40 % of the window's rows (32 of 80); the rest" in page
    )
    assert alerts["new_model_version"].evidence["vectors"] == sentence
