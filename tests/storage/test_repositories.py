"""Repository functions on SQLite and PostgreSQL: idempotent bulk insert, window reads by segment,
exact embedding round trips, eval scores and retention."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy import func, select

from storage.db import session_scope
from storage.models import Embedding, EvalScore
from storage.repositories import (
    EmbeddingRow,
    EvalScoreRow,
    count_by_segment,
    count_embeddings,
    count_eval_scores,
    count_samples,
    create_baseline,
    delete_samples_older_than,
    fetch_window,
    fetch_window_embeddings,
    freeze_baseline_samples,
    get_samples,
    insert_samples,
    load_baseline_samples,
    load_embeddings,
    load_eval_scores,
    samples_missing_embeddings,
    samples_missing_eval_scores,
    store_embeddings,
    store_eval_scores,
)

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def make_records(n: int, start: datetime = T0, step_s: float = 60.0, prefix: str = "s"):
    return [
        {"id": f"{prefix}{i:04d}", "timestamp": (start + timedelta(seconds=i * step_s)).isoformat(),
         "prompt": f"prompt {i}", "response": f"response {i}", "segment": ["a", "b", "c"][i % 3],
         "tenant": "t1" if i % 2 else "t2", "prompt_tokens": i, "latency_ms": 10.0 + i}
        for i in range(n)
    ]  # fmt: skip


def test_insert_is_idempotent_on_id(migrated_db):
    recs = make_records(10)
    with session_scope(migrated_db) as s:
        assert insert_samples(s, recs) == 10
    with session_scope(migrated_db) as s:
        # a replay of the same ids plus 5 new ones, with a duplicate inside the call too
        more = recs + make_records(5, prefix="n") + [recs[0]]
        assert insert_samples(s, more) == 5
        assert count_samples(s) == 15


def test_fetch_window_by_segment_and_tenant(migrated_db):
    recs = make_records(30)  # one per minute from T0
    recs[3]["eval_judge"] = 4.5
    recs[3]["customer"] = "acme"
    with session_scope(migrated_db) as s:
        insert_samples(s, recs)
    start, end = T0 + timedelta(minutes=5), T0 + timedelta(minutes=20)
    with session_scope(migrated_db) as s:
        window = fetch_window(s, start, end)
        assert [r["id"] for r in window] == [f"s{i:04d}" for i in range(5, 20)]  # [start, end)
        seg_b = fetch_window(s, start, end, segment="b")
        assert [r["id"] for r in seg_b] == [f"s{i:04d}" for i in range(5, 20) if i % 3 == 1]
        both = fetch_window(s, T0, end, segment="a", tenant="t1")
        assert {r["id"] for r in both} == {f"s{i:04d}" for i in range(20) if i % 3 == 0 and i % 2}
        assert len(fetch_window(s, T0, end, limit=4)) == 4
        assert count_samples(s, start, end, segment="b") == len(seg_b)
        assert count_by_segment(s, start, end) == {"a": 5, "b": 5, "c": 5}
        rec3 = get_samples(s, ["s0003", "missing"])
        assert len(rec3) == 1 and rec3[0]["eval_judge"] == 4.5 and rec3[0]["customer"] == "acme"
        assert rec3[0]["timestamp"] == "2026-11-29T10:03:00.000000Z"


def test_embeddings_roundtrip_bytes_exactly(migrated_db):
    rng = np.random.default_rng(7)
    with session_scope(migrated_db) as s:
        insert_samples(s, make_records(6))
        missing = samples_missing_embeddings(s, "mini", limit=10)
        assert [m["id"] for m in missing] == [f"s{i:04d}" for i in range(6)]
        vectors = {f"s{i:04d}": rng.standard_normal(384).astype(np.float32) for i in range(4)}
        vectors["s0000"][:3] = [-0.0, np.finfo(np.float32).tiny / 4, np.finfo(np.float32).min]
        rows = [
            EmbeddingRow(i, f, "mini", v)
            for i, v in vectors.items()
            for f in ("prompt", "response")
        ]
        assert store_embeddings(s, rows) == 8
        assert store_embeddings(s, rows[:2]) == 0  # idempotent
    with session_scope(migrated_db) as s:
        ids, matrix = load_embeddings(s, ["s0003", "s0005", "s0000"], "mini", "prompt")
        assert ids == ["s0003", "s0000"] and matrix.dtype == np.float32
        assert matrix[0].tobytes() == vectors["s0003"].tobytes()
        assert matrix[1].tobytes() == vectors["s0000"].tobytes()
        w_ids, w_mat = fetch_window_embeddings(s, T0, T0 + timedelta(hours=1), "mini", "response")
        assert w_ids == [f"s{i:04d}" for i in range(4)]
        assert np.array_equal(w_mat, np.stack([vectors[i] for i in w_ids]))
        assert [m["id"] for m in samples_missing_embeddings(s, "mini")] == ["s0004", "s0005"]
        assert len(samples_missing_embeddings(s, "other-model")) == 6
        assert count_embeddings(s, "mini") == 8
        dims = s.execute(select(Embedding.dim, func.length(Embedding.vector)).limit(1)).one()
        assert tuple(dims) == (384, 384 * 4)
        with pytest.raises(ValueError, match="field"):
            store_embeddings(s, [EmbeddingRow("s0004", "title", "mini", [1.0])])


def test_record_embeddings_and_window_with_embeddings(migrated_db):
    recs = make_records(2)
    recs[0]["prompt_embedding"] = [0.25, -0.5, 1.0]
    with session_scope(migrated_db) as s:
        insert_samples(s, recs)
    with session_scope(migrated_db) as s:
        window = fetch_window(s, T0, T0 + timedelta(hours=1), embedding_model="client:unknown")
        assert window[0]["prompt_embedding"].tolist() == [0.25, -0.5, 1.0]
        assert "prompt_embedding" not in window[1]


def test_eval_scores_store_load_and_missing(migrated_db):
    with session_scope(migrated_db) as s:
        insert_samples(s, make_records(5))
        rows = [EvalScoreRow(f"s{i:04d}", "judge", 1.0 + i, {"reason": "ok", "p": np.float64(0.5)})
                for i in range(3)]  # fmt: skip
        assert store_eval_scores(s, rows) == 3
        assert store_eval_scores(s, rows) == 0
        store_eval_scores(s, [EvalScoreRow("s0000", "refusal", 0.0)])
        with pytest.raises(ValueError, match="finite"):
            store_eval_scores(s, [EvalScoreRow("s0001", "x", float("nan"))])
    with session_scope(migrated_db) as s:
        judged = load_eval_scores(s, T0, T0 + timedelta(hours=1), name="judge")
        assert [(e.sample_id, e.score, e.segment) for e in judged] == [
            ("s0000", 1.0, "a"), ("s0001", 2.0, "b"), ("s0002", 3.0, "c")
        ]  # fmt: skip
        assert judged[0].timestamp == T0
        assert len(load_eval_scores(s, T0, T0 + timedelta(hours=1), segment="a")) == 2
        assert [m["id"] for m in samples_missing_eval_scores(s, "judge")] == ["s0003", "s0004"]
        assert count_eval_scores(s) == 4
        window = fetch_window(s, T0, T0 + timedelta(hours=1))
        assert window[0]["eval_judge"] == 1.0 and window[0]["eval_refusal"] == 0.0


def test_retention_cascades_but_baselines_keep_frozen_copies(migrated_db):
    with session_scope(migrated_db) as s:
        insert_samples(s, make_records(10, step_s=3600))  # hourly from T0
        store_embeddings(
            s, [EmbeddingRow(f"s{i:04d}", "prompt", "m", [float(i)]) for i in range(10)]
        )
        store_eval_scores(s, [EvalScoreRow(f"s{i:04d}", "judge", 3.0) for i in range(10)])
        baseline = create_baseline(s, "b", T0, T0 + timedelta(hours=4))
        assert freeze_baseline_samples(s, baseline.id, embedding_model="m") == 4
    with session_scope(migrated_db) as s:
        assert delete_samples_older_than(s, T0 + timedelta(hours=6)) == 6
    with session_scope(migrated_db) as s:
        assert count_samples(s) == 4
        assert s.scalar(select(func.count()).select_from(Embedding)) == 4  # cascaded
        assert s.scalar(select(func.count()).select_from(EvalScore)) == 4
        frozen = load_baseline_samples(s, baseline.id, with_embeddings=True)
        assert [r["id"] for r in frozen] == ["s0000", "s0001", "s0002", "s0003"]
        assert frozen[2]["prompt_embedding"].tolist() == [2.0] and frozen[2]["eval_judge"] == 3.0
