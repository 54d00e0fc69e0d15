"""The charts' per-bucket SQL (SQLite and PostgreSQL) against recounts in Python: the worst run
of each bucket per (test, feature, segment), and traffic counts, weights and percentiles."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import insert, select

from storage.db import session_factory
from storage.migrate import upgrade
from storage.models import DriftResult, DriftRun, Sample
from storage.repositories.series_buckets import (
    TRAFFIC_METRICS,
    bucket_index,
    traffic_buckets,
    worst_results_per_bucket,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
START = NOW - timedelta(days=2)
BUCKET_S = 6 * 3600
ORIGIN = math.floor(START.timestamp() / BUCKET_S) * BUCKET_S
P_TESTS = ("ks",)
SETTINGS = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

MAYBE = st.one_of(st.none(), st.sampled_from([0.0, 0.5, 1.0]), st.floats(0.0, 1.0))
RESULT = st.tuples(
    st.sampled_from(["psi", "ks"]), st.sampled_from(["*", "web"]), MAYBE, MAYBE, st.booleans()
)


def _bucket(moment: datetime) -> int:
    return int((moment.timestamp() - ORIGIN) // BUCKET_S)


@SETTINGS
@given(
    ends=st.lists(st.integers(-3 * 3600, 2 * 86400 + 3600), min_size=1, max_size=16, unique=True),
    results=st.lists(st.tuples(st.integers(0, 15), RESULT), max_size=60),
)
def test_worst_run_per_bucket_matches_a_recount(migrated_db, ends, results):
    factory = session_factory(migrated_db)
    with factory() as s:
        windows = [START + timedelta(seconds=e) for e in ends]
        s.execute(
            insert(DriftRun),
            [
                dict(
                    window_start=w - timedelta(hours=1),
                    window_end=w,
                    started_at=w,
                    status="done",
                    num_samples=1,
                    summary={},
                )
                for w in windows
            ],
        )
        runs = {rid: we for rid, we in s.query(DriftRun.id, DriftRun.window_end)}
        ids = sorted(runs)
        rows = [
            dict(
                run_id=ids[k % len(ids)],
                test=t,
                feature="f",
                segment=seg,
                statistic=stat,
                p_value=p,
                threshold=0.1,
                drifted=drifted,
                insufficient=False,
                detail={},
            )
            for k, (t, seg, stat, p, drifted) in results
        ]
        if rows:
            s.execute(insert(DriftResult), rows)
        got = worst_results_per_bucket(s, START, NOW, ORIGIN, BUCKET_S, p_value_tests=P_TESTS)
        s.rollback()
    # the oracle: in range, drifted first, then the highest statistic / lowest p (missing last),
    # latest run
    want: dict[tuple, dict] = {}
    for row in rows:
        end = runs[row["run_id"]].astimezone(UTC)
        if not START < end <= NOW:
            continue
        key = (_bucket(end), row["test"], row["segment"])
        score = (
            -row["p_value"]
            if row["test"] in P_TESTS and row["p_value"] is not None
            else (row["statistic"] if row["test"] not in P_TESTS else None)
        )
        rank = (not row["drifted"], score is None, -(score or 0.0), -row["run_id"])
        if key not in want or rank < want[key][0]:
            want[key] = (rank, row)
    assert {(g.bucket, g.test, g.segment): (g.run_id, g.drifted) for g in got} == {
        key: (row["run_id"], row["drifted"]) for key, (_, row) in want.items()
    }


SAMPLE = st.tuples(
    st.integers(-3600, 2 * 86400 + 600),
    st.sampled_from(["a", "b"]),
    *(st.one_of(st.none(), st.floats(0.0, 5000.0)) for _ in TRAFFIC_METRICS),
    st.sampled_from([1.0, 2.5, 10.0]),
)


@SETTINGS
@given(samples=st.lists(SAMPLE, max_size=80), tenant=st.sampled_from([None, "a"]))
def test_traffic_buckets_match_a_recount(migrated_db, samples, tenant):
    factory = session_factory(migrated_db)
    n = len(np.arange(ORIGIN, NOW.timestamp(), BUCKET_S))
    with factory() as s:
        rows = [
            dict(
                id=f"s{i}",
                timestamp=START + timedelta(seconds=sec),
                ingested_at=NOW,
                tenant=t,
                ttft_ms=a,
                tpot_ms=b,
                latency_ms=c,
                sample_weight=w,
                source="ingest",
            )
            for i, (sec, t, a, b, c, w) in enumerate(samples)
        ]
        if rows:
            s.execute(insert(Sample), rows)
        got = traffic_buckets(s, START, NOW, ORIGIN, BUCKET_S, n, tenant=tenant)
        s.rollback()
    inside = [r for r in rows if START <= r["timestamp"] < NOW and tenant in (None, r["tenant"])]
    for b in range(n):
        here = [r for r in inside if _bucket(r["timestamp"]) == b]
        assert got.count[b] == len(here)
        assert got.weighted[b] == pytest.approx(sum(r["sample_weight"] for r in here))
        for metric in TRAFFIC_METRICS:
            values = [r[metric] for r in here if r[metric] is not None]
            if values:
                assert got.quantiles[metric][:, b] == pytest.approx(
                    np.percentile(values, [50, 95]), abs=1e-6
                )
            else:
                assert np.isnan(got.quantiles[metric][:, b]).all()


@pytest.mark.parametrize(
    "version", [(3, 37, 0), None]
)  # strftime before SQLite 3.38, else unixepoch
def test_sqlite_buckets_by_either_function(tmp_path, monkeypatch, version):
    url = f"sqlite:///{tmp_path / 'b.db'}"
    upgrade(url)
    moments = [
        START + timedelta(seconds=s)
        for s in (0, 0.999999, BUCKET_S - 0.5, BUCKET_S, 7 * BUCKET_S + 1.25)
    ]
    with session_factory(url)() as s:
        s.execute(
            insert(Sample),
            [
                dict(id=f"s{i}", timestamp=m, ingested_at=m, source="ingest")
                for i, m in enumerate(moments)
            ],
        )
        if version is not None:
            monkeypatch.setattr(s.get_bind().dialect, "server_version_info", version)
        got = list(
            s.scalars(
                select(bucket_index(s, Sample.timestamp, ORIGIN, BUCKET_S)).order_by(
                    Sample.timestamp
                )
            )
        )
    assert got == [_bucket(m) for m in moments]


def test_sqlite_counts_stay_exact_past_the_row_cap(tmp_path, monkeypatch):
    from storage.repositories import series_buckets

    monkeypatch.setattr(series_buckets, "MAX_SAMPLE_ROWS", 3)
    url = f"sqlite:///{tmp_path / 'c.db'}"
    upgrade(url)
    with session_factory(url)() as s:
        s.execute(
            insert(Sample),
            [
                dict(
                    id=f"s{i}",
                    timestamp=START + timedelta(hours=i),
                    ingested_at=NOW,
                    latency_ms=float(i),
                    sample_weight=2.0,
                    source="ingest",
                )
                for i in range(10)
            ],
        )
        got = traffic_buckets(s, START, NOW, ORIGIN, BUCKET_S, 9)
    assert got.count.sum() == 10 and got.weighted.sum() == pytest.approx(20.0)


def test_sqlite_percentiles_past_the_row_cap_cover_the_whole_range(tmp_path, monkeypatch):
    """Past the cap the percentiles come from rows spread over the range: each bucket's median
    stays near the numpy median of all its rows (the first rows alone left later buckets empty)."""
    from storage.repositories import series_buckets

    monkeypatch.setattr(series_buckets, "MAX_SAMPLE_ROWS", 40)
    url = f"sqlite:///{tmp_path / 'd.db'}"
    upgrade(url)
    rows = []
    for b in range(4):  # 30 rows a bucket, each bucket's latencies around a level of its own
        for j in range(30):
            rows.append(
                dict(
                    id=f"b{b}-{j}",
                    timestamp=START + timedelta(seconds=b * BUCKET_S + j),
                    ingested_at=NOW,
                    latency_ms=100.0 * (b + 1) + j,
                    source="ingest",
                )
            )
    with session_factory(url)() as s:
        s.execute(insert(Sample), rows)
        got = traffic_buckets(s, START, NOW, ORIGIN, BUCKET_S, 9, quantiles=(0.5,))
    first = _bucket(START)
    assert got.count[first : first + 4].tolist() == [30] * 4
    for b in range(4):
        truth = np.median([100.0 * (b + 1) + j for j in range(30)])
        assert abs(got.quantiles["latency_ms"][0, first + b] - truth) <= 3.0
