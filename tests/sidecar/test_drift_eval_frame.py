"""The drift job's eval frame (the eval trend's trailing week) under the sample cap, on SQLite
and PostgreSQL: one row per kept sample with all its scores, never more rows than the cap."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import insert

from sidecar.jobs.eval_frame import EVAL_TREND_DAYS, trailing_eval_frame
from storage.db import session_factory
from storage.models import EvalScore, Sample

END = datetime(2026, 11, 30, tzinfo=UTC)


def _fill(url: str, n: int) -> None:
    step = timedelta(days=EVAL_TREND_DAYS) / n
    samples = [
        {
            "id": f"s{i:05d}",
            "timestamp": END - (i + 1) * step,
            "segment": "web",
            "tenant": "acme",
            "sample_weight": 1.0,
            "source": "engine",
        }
        for i in range(n)
    ]
    scores = [
        {"sample_id": f"s{i:05d}", "name": name, "score": float(i % 5), "created_at": END}
        for i in range(n)
        for name in ("judge", "relevancy")
    ]
    with session_factory(url)() as s:
        s.execute(insert(Sample.__table__), samples)
        s.execute(insert(EvalScore.__table__), scores)
        s.commit()


def test_eval_frame_is_capped_and_keeps_samples_whole(migrated_db):
    _fill(migrated_db, 300)
    with session_factory(migrated_db)() as s:
        whole = trailing_eval_frame(s, END, 10**6)
        capped = trailing_eval_frame(s, END, 40)
    assert len(whole) == 300
    assert len(capped) == 40 and capped["id"].is_unique
    assert capped[["eval_judge", "eval_relevancy"]].notna().all().all()
    assert set(capped["id"]) <= set(whole["id"])
    span = capped["timestamp"].max() - capped["timestamp"].min()
    assert span > 0.9 * (EVAL_TREND_DAYS - 1) * 86_400  # spread over the week, not its last hours
