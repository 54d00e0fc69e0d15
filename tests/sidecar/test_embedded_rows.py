"""The embedded-row cap: sized to the embedder, embedded first by the embed job, and the only
vectors a window's embedding tests read (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest
from hash_embedder import HashEmbedder
from traffic_gen import traffic

import sidecar.jobs.baselines as baselines
import sidecar.jobs.embed as embed_job
from drift.run import run_drift
from sidecar.embed_device import EmbedDeviceError
from sidecar.embedded_rows import CPU_EMBEDDED_ROWS, embedded_rows_cap
from storage.db import session_factory
from storage.repositories.embeddings import samples_missing_embeddings
from storage.repositories.samples import insert_samples, read_window

HOUR = timedelta(hours=1)
NOW = datetime(2026, 11, 30, 12, 0, 30, tzinfo=UTC)


def test_the_cap_follows_the_embedders_device(make_settings):
    def cap(**overrides):
        settings = make_settings("sqlite://", **overrides)
        return {
            gpu: embedded_rows_cap(settings, cuda_available=lambda gpu=gpu: gpu)
            for gpu in (False, True)
        }

    assert cap() == {False: CPU_EMBEDDED_ROWS, True: 50_000}  # auto: the window cap on CUDA
    assert cap(embed_device="cpu") == {False: CPU_EMBEDDED_ROWS, True: CPU_EMBEDDED_ROWS}
    assert cap(drift_max_window_rows=1500) == {False: 1500, True: 1500}  # never past the window
    assert cap(drift_max_embedded_rows=9000) == {False: 9000, True: 9000}
    assert cap(drift_max_embedded_rows=90_000) == {False: 50_000, True: 50_000}
    with pytest.raises(EmbedDeviceError, match="no CUDA device"):
        embedded_rows_cap(
            make_settings("sqlite://", embed_device="cuda"), cuda_available=lambda: False
        )


def _window_records() -> list[dict]:
    records = traffic(NOW - HOUR, NOW - timedelta(seconds=30), 360, seed=11)
    for i, record in enumerate(records):  # three segments, embedded at three different rates
        record["segment"] = "web" if i % 20 < 14 else "api" if i % 20 < 19 else "rare"
        record["sample_weight"] = 1.0 if record["segment"] == "web" else 3.0
    return records


def test_the_embed_job_embeds_the_subset_and_the_tests_read_only_it(
    migrated_db, make_settings, monkeypatch
):
    settings = make_settings(
        migrated_db,
        drift_interval_s=3600,
        drift_max_window_rows=200,
        drift_max_embedded_rows=60,
        drift_min_rows_per_segment=10,
    )
    factory = session_factory(migrated_db)
    embedder = HashEmbedder(embed_job.model_name(settings))
    monkeypatch.setattr(embed_job, "get_embedder", lambda _config: embedder)
    base_end = NOW - 2 * HOUR
    with factory() as s:
        insert_samples(s, traffic(base_end - 3 * HOUR, base_end, 240, seed=3), now=base_end)
        insert_samples(s, _window_records(), now=NOW - timedelta(minutes=1))
        s.commit()
    built = baselines.build_baseline_from_window(
        settings, factory, base_end - 3 * HOUR, base_end, now=base_end
    )
    with factory() as s:  # the baseline embeds every row it reads (its cap, not the subset's)
        assert built.num_source == 200
        baseline, _ = baselines.load_baseline_with_frame(s, built.baseline_id)
    assert baseline.features.embeddings["prompt_embedding"].rows.size == 200

    window = (NOW - HOUR, NOW)
    done = embed_job.run_embed_job(settings, factory, NOW, windows=[window], unread=False)
    caps = {
        "embedding_model": embed_job.model_name(settings),
        "max_rows": 200,
        "max_embedded_rows": 60,
        "min_per_segment": 10,
    }
    with factory() as s:
        first = read_window(s, *window, **caps)
        left = samples_missing_embeddings(s, caps["embedding_model"], limit=10_000)
    assert done.read_samples == done.samples == 60 and done.waiting == 0
    assert first.vector_ids is not None and len(first.vector_ids) == 60
    assert {r["id"] for r in first.records if "prompt_embedding" in r} == first.vector_ids
    window_ids = {r["id"] for r in _window_records()}
    assert len({r["id"] for r in left} & window_ids) == 360 - 60  # nothing else embedded yet

    while embed_job.run_embed_job(settings, factory, NOW, windows=[window], unread=True).samples:
        pass
    with factory() as s:
        assert not samples_missing_embeddings(s, caps["embedding_model"], limit=10)
        again = read_window(s, *window, **caps)
    before = run_drift(baseline, pd.DataFrame(first.records), rng_seed=5)
    after = run_drift(baseline, pd.DataFrame(again.records), rng_seed=5)
    mmd = [r for r in before.results if r.test == "mmd" and r.segment == "*"]
    assert mmd and all(r.statistic is not None for r in mmd)  # the embedding tests did run
    assert [r.to_dict() for r in before.results] == [r.to_dict() for r in after.results]
