"""Baseline lifecycle and bounded freezing; drift run/result persistence and re-runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from storage.db import session_scope
from storage.repositories import (
    BaselineError,
    DriftResultRow,
    add_baseline_samples,
    add_drift_results,
    count_baseline_samples,
    create_baseline,
    finish_drift_run,
    freeze_baseline_samples,
    get_active_baseline,
    get_drift_results,
    insert_samples,
    latest_drift_run,
    list_baselines,
    load_baseline_embeddings,
    load_baseline_samples,
    set_baseline_status,
    start_drift_run,
    update_baseline,
)

T0 = datetime(2026, 11, 29, 0, 0, tzinfo=UTC)


def _samples(n):
    return [{"id": f"x{i:03d}", "timestamp": (T0 + timedelta(minutes=i)).timestamp(),
             "prompt": f"p{i}", "segment": "a" if i % 2 else "b"} for i in range(n)]  # fmt: skip


def test_freeze_is_bounded_seeded_and_segment_aware(migrated_db):
    with session_scope(migrated_db) as s:
        insert_samples(s, _samples(40))
        b1 = create_baseline(s, "one", T0, T0 + timedelta(hours=1))
        b2 = create_baseline(s, "two", T0, T0 + timedelta(hours=1))
        b3 = create_baseline(s, "three", T0, T0 + timedelta(hours=1))
        assert freeze_baseline_samples(s, b1.id, max_samples=7, seed=3) == 7
        assert freeze_baseline_samples(s, b2.id, max_samples=7, seed=3) == 7
        assert freeze_baseline_samples(s, b1.id, max_samples=7) == 0  # already full
        assert freeze_baseline_samples(s, b3.id, segment="a") == 20
    with session_scope(migrated_db) as s:
        ids1 = [r["id"] for r in load_baseline_samples(s, b1.id)]
        ids2 = [r["id"] for r in load_baseline_samples(s, b2.id)]
        assert ids1 == ids2 and len(set(ids1)) == 7  # same seed, same subset, no repeats
        assert count_baseline_samples(s, b1.id) == 7
        assert {r["segment"] for r in load_baseline_samples(s, b3.id)} == {"a"}
        # explicit records: bounded too
        b4 = create_baseline(s, "four", T0, T0 + timedelta(hours=1))
        recs = [{"id": f"r{i}", "prompt": "q", "prompt_embedding": np.full(4, i, np.float32)}
                for i in range(5)]  # fmt: skip
        assert add_baseline_samples(s, b4.id, recs, max_samples=3, embedding_model="m") == 3
        ids, mat = load_baseline_embeddings(s, b4.id, "prompt")
        assert ids == ["r0", "r1", "r2"] and mat.shape == (3, 4) and mat[2].tolist() == [2.0] * 4
        with pytest.raises(BaselineError, match="window_end"):
            create_baseline(s, "bad", T0, T0)


def test_status_transitions_and_single_active(migrated_db):
    with session_scope(migrated_db) as s:
        a = create_baseline(s, "a", T0, T0 + timedelta(hours=1), spec={"edges": np.arange(3.0)})
        b = create_baseline(s, "b", T0, T0 + timedelta(hours=1))
        with pytest.raises(BaselineError, match="cannot become active"):
            set_baseline_status(s, a.id, "active")
        set_baseline_status(s, a.id, "validated", validation={"ok": True, "psi": np.float32(0.01)})
        set_baseline_status(s, a.id, "active")
        set_baseline_status(s, b.id, "validated")
        set_baseline_status(s, b.id, "active")  # retires a
        update_baseline(s, b.id, spec={"thresholds": {"psi": 0.2}}, cluster_model=b"\x00\x01")
        with pytest.raises(BaselineError, match="unknown baseline status"):
            set_baseline_status(s, b.id, "great")
        with pytest.raises(BaselineError, match="no baseline"):
            set_baseline_status(s, 999, "validated")
    with session_scope(migrated_db) as s:
        active = get_active_baseline(s)
        assert active.id == b.id and active.activated_at is not None
        assert active.spec == {"thresholds": {"psi": 0.2}} and active.cluster_model == b"\x00\x01"
        assert [x.name for x in list_baselines(s, status="retired")] == ["a"]
        retired = list_baselines(s, status="retired")[0]
        assert retired.spec == {"edges": [0.0, 1.0, 2.0]} and retired.validation[
            "psi"
        ] == pytest.approx(0.01)


def test_drift_run_claim_results_and_rerun_after_kill(migrated_db):
    end = T0 + timedelta(hours=1)
    results = [
        DriftResultRow("psi", "latency_ms", "*", np.float64(0.31), None, 0.2, True),
        DriftResultRow(
            "ks", "prompt_tokens", "a", 0.05, float("nan"), 0.1, False, False, {"n": np.int64(3)}
        ),
        DriftResultRow("mmd", "prompt_embedding", "b", insufficient=True),
    ]
    with session_scope(migrated_db) as s:
        run = start_drift_run(s, T0, end, baseline_id=None)
        assert run is not None and run.status == "running"
        assert add_drift_results(s, run.id, results) == 3
        first_id = run.id
    # the job died before finishing: a new attempt on the same window starts over, no duplicates
    with session_scope(migrated_db) as s:
        rerun = start_drift_run(s, T0, end)
        assert rerun.id == first_id and get_drift_results(s, rerun.id) == []
        add_drift_results(s, rerun.id, results)
        finish_drift_run(
            s, rerun.id, num_samples=120, summary={"drifted": 1}, report_path="/r/x.html"
        )
    with session_scope(migrated_db) as s:
        assert start_drift_run(s, T0, end) is None  # done: never redone
        latest = latest_drift_run(s)
        assert (
            latest.id == first_id and latest.num_samples == 120 and latest.finished_at is not None
        )
        rows = get_drift_results(s, first_id)
        assert len(rows) == 3
        ks = next(r for r in rows if r.test == "ks")
        assert ks.p_value is None and ks.detail == {"n": 3} and ks.segment == "a"
        assert [r.test for r in get_drift_results(s, first_id, drifted_only=True)] == ["psi"]
        assert [r.feature for r in get_drift_results(s, first_id, segment="b")] == [
            "prompt_embedding"
        ]
        with pytest.raises(ValueError, match="status"):
            finish_drift_run(s, first_id, status="weird")


def test_longest_segment_label_is_stored(migrated_db):
    """`prompt_version=` and a 128-character version: the longest label the drift job makes
    (PostgreSQL refused it at 128 characters and the window's run failed)."""
    label = "prompt_version=" + "v" * 128
    with session_scope(migrated_db) as s:
        run = start_drift_run(s, T0, T0 + timedelta(hours=1), baseline_id=None)
        add_drift_results(
            s, run.id, [DriftResultRow("psi", "latency_ms", label, 0.3, None, 0.2, True)]
        )
        run_id = run.id
    with session_scope(migrated_db) as s:
        assert [r.segment for r in get_drift_results(s, run_id, segment=label)] == [label]
