"""The eval-trend read under a sample cap (SQLite and PostgreSQL): identical to the uncapped read
when the scored samples fit, exactly the systematic time-ordered sample when they don't, bounded
on a large week, and the trend statistic of the capped read close to the full one."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import insert, text

from drift.detectors.eval_trend import eval_trend_test
from storage.db import session_factory
from storage.models import EvalScore, Sample
from storage.repositories.eval_scores import load_eval_scores

T0 = datetime(2026, 11, 23, tzinfo=UTC)
WEEK = timedelta(days=7)
NAMES = ("judge", "refusal")


def _fill(url: str, n: int, *, seed: int = 0) -> list[tuple[datetime, str]]:
    """`n` samples spread over the week (judge score falling 20 % over it, every third sample
    without a refusal score, every seventh unscored), bulk-inserted; returns (time, id) of the
    scored ones, in time order."""
    rng = np.random.default_rng(seed)
    offsets = np.sort(rng.uniform(0, WEEK.total_seconds(), n))
    samples, scores, scored = [], [], []
    for i, off in enumerate(offsets):
        sid, ts = f"s{i:07d}", T0 + timedelta(seconds=float(off))
        samples.append(
            {
                "id": sid,
                "timestamp": ts,
                "segment": ("web", "api")[i % 2],
                "tenant": "acme",
                "sample_weight": 1.0,
                "source": "engine",
            }
        )
        if i % 7 == 6:
            continue
        scored.append((ts, sid))
        judge = 4.0 * (1 - 0.2 * off / WEEK.total_seconds()) + rng.normal(0, 0.5)
        scores.append({"sample_id": sid, "name": "judge", "score": judge, "created_at": ts})
        if i % 3:
            scores.append(
                {"sample_id": sid, "name": "refusal", "score": float(i % 2), "created_at": ts}
            )
    with session_factory(url)() as s:
        s.execute(insert(Sample.__table__), samples)  # executemany: seconds for tens of thousands
        s.execute(insert(EvalScore.__table__), scores)
        s.commit()
        if s.bind.dialect.name == "postgresql":
            # What autovacuum does within a minute of a bulk load. Without it a pooled schema
            # keeps the statistics of its emptied tables (no rows in allocated pages), and the
            # planner's one-row estimates turn the capped read into a quadratic nested loop.
            s.execute(text("ANALYZE samples"))
            s.execute(text("ANALYZE eval_scores"))
            s.commit()
    return sorted(scored)


def _systematic(ids: list[str], q: int) -> set[str]:
    """The oracle: 1-based row k is kept when floor(k*q/n) steps up."""
    n = len(ids)
    return {ids[k - 1] for k in range(1, n + 1) if (k * q) // n > ((k - 1) * q) // n}


def test_small_week_capped_read_equals_uncapped(migrated_db):
    scored = _fill(migrated_db, 120)
    with session_factory(migrated_db)() as s:
        full = load_eval_scores(s, T0, T0 + WEEK)
        assert len({r.sample_id for r in full}) == len(scored)
        for cap in (len(scored), len(scored) + 1, 10**6):
            assert load_eval_scores(s, T0, T0 + WEEK, max_samples=cap) == full
        judge = load_eval_scores(s, T0, T0 + WEEK, name="judge")
        assert load_eval_scores(s, T0, T0 + WEEK, name="judge", max_samples=len(scored)) == judge
    full_judge = np.array([r.score for r in full if r.name == "judge"])
    capped_judge = np.array([r.score for r in judge])
    ref = np.random.default_rng(5).normal(4.0, 0.5, 200)
    assert (
        eval_trend_test(ref, capped_judge).to_dict() == eval_trend_test(ref, full_judge).to_dict()
    )


def test_capped_read_is_the_systematic_sample_with_whole_samples(migrated_db):
    scored = _fill(migrated_db, 200, seed=1)
    ids = [sid for _, sid in scored]
    with session_factory(migrated_db)() as s:
        full = load_eval_scores(s, T0, T0 + WEEK)
        capped = load_eval_scores(s, T0, T0 + WEEK, max_samples=37)
        with pytest.raises(ValueError, match="positive"):
            load_eval_scores(s, T0, T0 + WEEK, max_samples=0)
    kept = {r.sample_id for r in capped}
    assert kept == _systematic(ids, 37) and len(kept) == 37
    # every score of a kept sample comes along; order stays by sample time
    assert capped == [r for r in full if r.sample_id in kept]


def test_large_week_read_is_bounded_and_keeps_the_trend(migrated_db):
    scored = _fill(migrated_db, 24_000, seed=2)
    cap = 2_000
    with session_factory(migrated_db)() as s:
        full = load_eval_scores(s, T0, T0 + WEEK, name="judge")
        capped = load_eval_scores(s, T0, T0 + WEEK, max_samples=cap)
    assert len(full) == len(scored) > 10 * cap
    assert len({r.sample_id for r in capped}) == cap and len(capped) <= cap * len(NAMES)
    # each day keeps its share of the sample (the trend's daily means need every day)
    per_day = Counter((r.timestamp - T0).days for r in capped if r.name == "judge")
    full_day = Counter((r.timestamp - T0).days for r in full)
    for day in range(7):
        assert per_day[day] == pytest.approx(cap * full_day[day] / len(full), abs=2)
    # the trend statistic of the capped read stays close to the full week's
    ref = np.random.default_rng(3).normal(4.0, 0.5, 2_000)
    full_ts = np.array([r.timestamp.timestamp() for r in full])
    cap_judge = [r for r in capped if r.name == "judge"]
    whole = eval_trend_test(ref, np.array([r.score for r in full]), timestamps=full_ts)
    part = eval_trend_test(
        ref,
        np.array([r.score for r in cap_judge]),
        timestamps=np.array([r.timestamp.timestamp() for r in cap_judge]),
    )
    assert whole.drifted and part.drifted
    assert part.statistic == pytest.approx(whole.statistic, abs=0.01)
    for a, b in zip(part.detail["daily_means"], whole.detail["daily_means"], strict=True):
        assert a == pytest.approx(b, abs=0.1)


def test_any_window_and_cap_read_exactly_the_oracle_sample(migrated_db):
    scored = _fill(migrated_db, 60, seed=4)

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(lo=st.integers(0, 7 * 24), hours=st.integers(1, 7 * 24), cap=st.integers(1, 80))
    def check(lo: int, hours: int, cap: int) -> None:
        start = T0 + timedelta(hours=lo)
        end = start + timedelta(hours=hours)
        ids = [sid for ts, sid in scored if start <= ts < end]
        with session_factory(migrated_db)() as s:
            got = {r.sample_id for r in load_eval_scores(s, start, end, max_samples=cap)}
        assert got == (_systematic(ids, cap) if ids else set())
        assert len(got) == min(cap, len(ids))

    check()
