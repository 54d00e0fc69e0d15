"""The embed job embeds what the drift job reads (SQLite and PostgreSQL): the capped window's
rows first, unread rows only when none of those wait; and the capped window's drift results do
not depend on whether the unread rows have vectors."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from hash_embedder import HashEmbedder
from sqlalchemy import select

import sidecar.jobs.embed as embed_job
from drift.baseline.build import build_baseline
from drift.features.segments import DEFAULT_SEGMENT_BY
from drift.run import run_drift
from storage.db import session_factory
from storage.models import Embedding
from storage.repositories.samples import fetch_window, insert_samples

HOUR = timedelta(hours=1)
NOW = datetime(2026, 11, 30, 12, 20, tzinfo=UTC)
WINDOW = (datetime(2026, 11, 30, 11, tzinfo=UTC), datetime(2026, 11, 30, 12, tzinfo=UTC))
BASE = (datetime(2026, 11, 30, 9, tzinfo=UTC), datetime(2026, 11, 30, 10, tzinfo=UTC))
MIX = {"web": 260, "api": 90, "rare": 25}
CAP, FLOOR = 120, 30


def _records(start: datetime, tag: str, shift: int = 0) -> list[dict]:
    rng = np.random.default_rng(len(tag) + shift)
    out = []
    for seg, n in MIX.items():
        for i in range(n):
            topic = int(rng.integers(0, 6 + shift))
            out.append({"id": f"{tag}-{seg}-{i}", "segment": seg,
                        "timestamp": (start + HOUR * (i + 0.5) / n).isoformat(),
                        "prompt": f"{seg} question about topic {topic} number {i % 7}",
                        "response": f"answer {topic}", "prompt_tokens": int(rng.integers(5, 60)),
                        "completion_tokens": int(rng.integers(5, 200)),
                        "latency_ms": float(rng.gamma(2.0, 300.0)),
                        "sample_weight": 1.0 + (i % 2)})  # fmt: skip
    return out


@pytest.fixture
def world(migrated_db, make_settings, monkeypatch):
    settings = make_settings(
        migrated_db, drift_max_window_rows=CAP, drift_min_rows_per_segment=FLOOR
    )
    factory = session_factory(migrated_db)
    with factory() as s:
        insert_samples(s, _records(BASE[0], "b"), now=BASE[1])
        insert_samples(s, _records(WINDOW[0], "w", shift=3), now=WINDOW[1] - timedelta(minutes=5))
        s.commit()
    fake = HashEmbedder(embed_job.model_name(settings))
    monkeypatch.setattr(embed_job, "get_embedder", lambda _p: fake)
    return settings, factory, fake


def _embedded(factory) -> set[str]:
    with factory() as s:
        return set(s.scalars(select(Embedding.sample_id).distinct()))


def _read_ids(settings, factory, window) -> set[str]:
    with factory() as s:
        return {
            r["id"]
            for r in fetch_window(s, *window, max_rows=CAP, min_per_segment=FLOOR, with_extra=False)
        }


def test_a_busy_run_embeds_only_the_rows_the_window_reads(world, monkeypatch):
    settings, factory, _ = world
    monkeypatch.setattr(embed_job, "BATCH", 16)
    monkeypatch.setattr(embed_job, "MAX_BATCHES_PER_RUN", 5)  # 80 of the window's 120 read rows
    first = embed_job.run_embed_job(settings, factory, NOW)
    read = _read_ids(settings, factory, WINDOW)
    assert first.samples == first.read_samples == 80 and first.waiting == 40
    assert _embedded(factory) <= read  # nothing unread while read rows wait
    second = embed_job.run_embed_job(settings, factory, NOW)
    assert second.read_samples == 40 and second.waiting == 0
    # then the run's last two batches go to unread rows, oldest first (the earlier hour's)
    assert second.samples == 40 + 2 * 16 and read <= _embedded(factory)
    assert all(i.startswith("b-") for i in _embedded(factory) - read)
    monkeypatch.setattr(settings, "embed_unread_when_idle", False)
    assert embed_job.run_embed_job(settings, factory, NOW).samples == 0


def test_the_drift_job_windows_are_served_not_the_one_filling(world, monkeypatch):
    settings, factory, _ = world
    monkeypatch.setattr(settings, "embed_unread_when_idle", False)
    result = embed_job.run_embed_job(settings, factory, NOW, windows=[WINDOW])
    assert result.samples == CAP and _embedded(factory) == _read_ids(settings, factory, WINDOW)


def _results(settings, factory) -> list[dict]:
    model = embed_job.model_name(settings)
    with factory() as s:
        base = pd.DataFrame(
            fetch_window(s, *BASE, embedding_model=model, max_rows=CAP, min_per_segment=FLOOR)
        )
        cur = pd.DataFrame(
            fetch_window(s, *WINDOW, embedding_model=model, max_rows=CAP, min_per_segment=FLOOR)
        )
    assert cur["prompt_embedding"].notna().all()  # every read row has its vector
    report = run_drift(
        build_baseline(base, seed=3), cur, segment_by=DEFAULT_SEGMENT_BY, rng_seed=11
    )
    return [r.to_dict() for r in report.results]


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_capped_window_results_do_not_depend_on_unread_rows_having_vectors(world, monkeypatch):
    settings, factory, _ = world
    monkeypatch.setattr(settings, "embed_unread_when_idle", False)
    embed_job.run_embed_job(settings, factory, NOW, windows=[BASE, WINDOW])
    read = _read_ids(settings, factory, BASE) | _read_ids(settings, factory, WINDOW)
    assert _embedded(factory) == read and len(read) == 2 * CAP
    only_read = _results(settings, factory)

    monkeypatch.setattr(settings, "embed_unread_when_idle", True)
    embed_job.run_embed_job(settings, factory, NOW, windows=[])
    assert len(_embedded(factory)) == 2 * sum(MIX.values())  # now every row has vectors
    everything = _results(settings, factory)
    assert any(
        r["test"].startswith(("mmd", "embedding")) or "embedding" in (r["feature"] or "")
        for r in only_read
    )  # the embedding tests ran
    assert _same(only_read, everything)
