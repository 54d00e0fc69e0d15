"""The rows whose vectors a capped window's embedding tests read (SQLite and PostgreSQL): a nested
stratified subset of the window's rows, the same for the embed job's queue and the loader, and
the loader's read does not depend on which other rows happen to be embedded."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete
from window_mixes import HOUR, MODEL, T0, hour_records, mixes

from storage.db import session_factory
from storage.draw import sample_draw
from storage.models import Sample
from storage.repositories.embed_queue import queue_state, queued_samples, window_queue
from storage.repositories.embeddings import EmbeddingRow, store_embeddings
from storage.repositories.samples import read_window
from storage.repositories.window_cap import stratum_quotas


def _embed(session, ids, offset: float = 0.0) -> None:
    rows = []
    for i in ids:
        vec = np.full(4, (sample_draw(i) % 997) / 997 + offset, dtype=np.float32)
        rows += [EmbeddingRow(i, "prompt", MODEL, vec), EmbeddingRow(i, "response", MODEL, vec)]
    store_embeddings(session, rows)
    session.commit()


def _insert(factory, records) -> None:
    from storage.repositories.samples import insert_samples

    with factory() as s:
        s.execute(delete(Sample))
        insert_samples(s, records)
        s.commit()


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    mix=mixes,
    cap=st.integers(1, 200),
    embedded_cap=st.integers(1, 200),
    floor=st.integers(1, 60),
    tag=st.integers(0, 10**6),
)
def test_the_embedded_rows_are_the_first_by_draw_of_each_segments_read_rows(
    migrated_db, mix, cap, embedded_cap, floor, tag
):
    factory = session_factory(migrated_db)
    records = hour_records(mix, str(tag))
    _insert(factory, records)
    caps = {"max_rows": cap, "min_per_segment": floor}
    with factory() as s:
        queue = window_queue(s, T0, T0 + HOUR, max_embedded_rows=embedded_cap, **caps)
        queued = {r["id"] for r in queued_samples(s, queue, MODEL, limit=10_000)}
        waiting, _ = queue_state(s, queue, MODEL)
        _embed(s, [r["id"] for r in records])  # every row, read or not, has vectors now
        read = read_window(
            s, T0, T0 + HOUR, embedding_model=MODEL, max_embedded_rows=embedded_cap, **caps
        )
    window = {r["id"]: r.get("segment") for r in read.records}
    with_vectors = {r["id"] for r in read.records if "prompt_embedding" in r}
    # the queue, the loader's subset and the rows that carry vectors are one set, inside the window
    assert queued == with_vectors == (set(window) if read.vector_ids is None else read.vector_ids)
    assert queued <= set(window) and waiting == len(queued) == queue.read_rows
    assert len(queued) == min(len(window), embedded_cap)
    # stratified over the window's read rows, as the window over the segment's rows
    read_per_segment = Counter(window.values())
    assert dict(Counter(window[i] for i in queued)) == {
        k: v for k, v in stratum_quotas(read_per_segment, embedded_cap, floor).items() if v
    }
    # inside a segment: the rows with the smallest draws of the whole segment
    for seg in mix:
        everyone = sorted(
            (sample_draw(r["id"]), r["id"]) for r in records if r.get("segment") == seg
        )
        mine = sorted((sample_draw(i), i) for i in queued if window[i] == seg)
        assert mine == everyone[: len(mine)]


def test_the_read_is_the_same_whatever_else_was_embedded(migrated_db):
    factory = session_factory(migrated_db)
    records = hour_records({"web": 90, "api": 60, "rare": 12, None: 30}, "same")
    _insert(factory, records)
    caps = {"max_rows": 100, "min_per_segment": 10, "max_embedded_rows": 40}
    with factory() as s:
        subset = read_window(s, T0, T0 + HOUR, **caps).vector_ids
        assert subset is not None and len(subset) == 40
        _embed(s, sorted(subset))
        only_subset = read_window(s, T0, T0 + HOUR, embedding_model=MODEL, **caps)
        _embed(s, [r["id"] for r in records if r["id"] not in subset], offset=5.0)
        everything = read_window(s, T0, T0 + HOUR, embedding_model=MODEL, **caps)
    assert only_subset.vector_ids == everything.vector_ids == subset
    assert len(only_subset.records) == len(everything.records) == 100
    for a, b in zip(only_subset.records, everything.records, strict=True):
        assert a.keys() == b.keys() and a["sample_weight"] == b["sample_weight"]
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
