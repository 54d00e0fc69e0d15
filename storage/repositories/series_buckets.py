"""The dashboard charts' data aggregated per time bucket in SQL, so a 30-day chart costs a few
hundred rows to Python, not one per run or per sample.

Buckets are floor((t - origin) / bucket_s) for an origin aligned to bucket_s; t is a sample's
timestamp, or a drift run's window end.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import ColumnElement, Float, Integer, case, cast, func, literal_column, select
from sqlalchemy.dialects.postgresql import array
from sqlalchemy.orm import Session

from storage.models import DriftResult, DriftRun, EvalScore, Sample
from storage.repositories.bucket_quantiles import bucket_quantiles
from storage.repositories.series import (
    MAX_RESULT_ROWS,
    MAX_RUNS,
    RESULT_COLUMNS,
    ResultPoint,
    result_filter,
    run_filter,
)
from storage.types import to_utc

TRAFFIC_METRICS = ("ttft_ms", "tpot_ms", "latency_ms")
MAX_SAMPLE_ROWS = 200_000  # SQLite only: the rows read back for percentiles
ROW_CHUNK = 500


@dataclass(frozen=True)
class BucketResult(ResultPoint):
    """The worst result of one (test, feature, segment) among the runs of one bucket (drifted
    when any of those runs drifted)."""

    bucket: int


@dataclass(frozen=True)
class TrafficBuckets:
    """Per bucket 0..n-1: logged samples, their summed weight, and per metric a
    (len(quantiles), n) array of percentiles (NaN where a bucket has no value)."""

    count: np.ndarray
    weighted: np.ndarray
    quantiles: dict[str, np.ndarray]


def bucket_index(session: Session, column: Any, origin: float, bucket_s: int) -> ColumnElement[int]:
    """SQL for floor((column - origin) / bucket_s) in whole seconds, on SQLite and PostgreSQL
    (rows are filtered to column >= origin, so integer division floors)."""
    dialect = session.get_bind().dialect
    if dialect.name == "postgresql":
        seconds = cast(
            func.extract("epoch", column), Float
        )  # double precision: cheaper than numeric
        return cast(func.floor((seconds - origin) / bucket_s), Integer)
    # SQLite keeps naive UTC text; unixepoch (3.38+) parses it faster than strftime,
    # same whole seconds
    new_enough = (dialect.server_version_info or (0,)) >= (3, 38)
    epoch_s = func.unixepoch(column) if new_enough else cast(func.strftime("%s", column), Integer)
    return cast((epoch_s - int(origin)) / int(bucket_s), Integer)


def eval_bucket_means(
    session: Session, start: datetime, end: datetime, origin: float, bucket_s: int
) -> list[tuple[int, str, float, int]]:
    """(bucket, evaluator, mean score, count) of samples in [start, end), by sample time."""
    bucket = bucket_index(session, Sample.timestamp, origin, bucket_s).label("bucket")
    query = (
        select(bucket, EvalScore.name, func.avg(EvalScore.score), func.count())
        .join(Sample, Sample.id == EvalScore.sample_id)
        .where(Sample.timestamp >= to_utc(start), Sample.timestamp < to_utc(end))
        .group_by(bucket, EvalScore.name)
    )
    return [
        (int(b), name, float(mean), int(n))
        for b, name, mean, n in session.connection().execute(query).all()
    ]


def worst_results_per_bucket(
    session: Session,
    start: datetime,
    end: datetime,
    origin: float,
    bucket_s: int,
    *,
    p_value_tests: Sequence[str],
    baseline_id: int | None = None,
    test: str | None = None,
    feature: str | None = None,
    segment: str | None = None,
    limit: int = MAX_RESULT_ROWS,
) -> list[BucketResult]:
    """Per bucket of run window ends and per (test, feature, segment): the one result of the
    worst run (a drifted one first, then the highest statistic, or the lowest p-value for
    `p_value_tests`), so a spike in one run stays visible however many runs share its bucket.
    Runs as `runs_between` picks them."""
    runs = (
        select(
            DriftRun.id,
            bucket_index(session, DriftRun.window_end, origin, bucket_s).label("bucket"),
        )
        .where(*run_filter(start, end, baseline_id=baseline_id))
        .order_by(DriftRun.window_end.desc(), DriftRun.id.desc())
        .limit(MAX_RUNS)
        .subquery()
    )
    badness = case(
        (DriftResult.test.in_(list(p_value_tests)), -DriftResult.p_value),
        else_=DriftResult.statistic,
    )
    partition = (runs.c.bucket, DriftResult.test, DriftResult.feature, DriftResult.segment)
    ranked = select(
        runs.c.bucket,
        *RESULT_COLUMNS,
        func.row_number()
        .over(
            partition_by=partition,
            order_by=(
                case(
                    (DriftResult.drifted, 0), else_=1
                ),  # a drifted run first, so the bucket shows it
                badness.is_(None),
                badness.desc(),  # then the worst score (NULL last on both backends)
                DriftResult.run_id.desc(),
            ),
        )
        .label("rank"),
    ).join(runs, runs.c.id == DriftResult.run_id)
    latest = ranked.where(*result_filter(test, feature, segment)).subquery()
    query = (
        select(
            latest.c.run_id,
            latest.c.test,
            latest.c.feature,
            latest.c.segment,
            latest.c.statistic,
            latest.c.p_value,
            latest.c.threshold,
            latest.c.drifted,
            latest.c.insufficient,
            latest.c.bucket,
        )
        .where(latest.c.rank == 1)
        .limit(limit)
    )
    return [
        BucketResult(rid, t, f, s, stat, p, thr, bool(drifted), bool(insufficient), int(b))
        for rid, t, f, s, stat, p, thr, drifted, insufficient, b in session.connection()
        .execute(query)
        .all()
    ]


def traffic_buckets(
    session: Session,
    start: datetime,
    end: datetime,
    origin: float,
    bucket_s: int,
    n: int,
    *,
    quantiles: Sequence[float] = (0.5, 0.95),
    tenant: str | None = None,
    segment: str | None = None,
) -> TrafficBuckets:
    """Samples in [start, end) per bucket 0..n-1: count, summed weight and percentiles of
    TTFT, TPOT and latency. PostgreSQL computes the percentiles (`percentile_cont`); SQLite,
    which has none, sends back the numbers only and numpy computes them."""
    conditions = [Sample.timestamp >= to_utc(start), Sample.timestamp < to_utc(end)]
    if tenant is not None:
        conditions.append(Sample.tenant == tenant)
    if segment is not None:
        conditions.append(Sample.segment == segment)
    bucket = bucket_index(session, Sample.timestamp, origin, bucket_s)
    if session.get_bind().dialect.name == "postgresql":
        return _traffic_postgresql(session, bucket, conditions, n, quantiles)
    return _traffic_sqlite(session, bucket, conditions, n, quantiles)


def _traffic_postgresql(
    session: Session,
    bucket: ColumnElement[int],
    conditions: list,
    n: int,
    quantiles: Sequence[float],
) -> TrafficBuckets:
    label = bucket.label("bucket")
    levels = array([float(q) for q in quantiles])
    query = (
        select(
            label,
            func.count(),
            func.sum(func.coalesce(Sample.sample_weight, 1.0)),
            *(
                func.percentile_cont(levels).within_group(getattr(Sample, m))
                for m in TRAFFIC_METRICS
            ),
        )
        .where(*conditions)
        .group_by(label)
    )
    count, weighted = np.zeros(n, dtype=np.int64), np.zeros(n)
    found = {m: np.full((len(quantiles), n), np.nan) for m in TRAFFIC_METRICS}
    for b, rows, weight, *per_metric in session.connection().execute(query).all():
        if 0 <= b < n:
            count[b], weighted[b] = rows, weight
            for metric, values in zip(TRAFFIC_METRICS, per_metric, strict=True):
                if values is not None:  # NULL when the bucket has no value of this metric
                    found[metric][:, b] = [np.nan if v is None else v for v in values]
    return TrafficBuckets(count, weighted, found)


def _traffic_sqlite(
    session: Session,
    bucket: ColumnElement[int],
    conditions: list,
    n: int,
    quantiles: Sequence[float],
) -> TrafficBuckets:
    table = _read_traffic(session, bucket, conditions, stride=1)
    idx = table[:, 0].astype(np.int64)
    keep = (idx >= 0) & (idx < n)
    count = np.bincount(idx[keep], minlength=n)
    weighted: np.ndarray = np.bincount(idx[keep], weights=table[keep, -1], minlength=n)
    if len(table) > MAX_SAMPLE_ROWS:
        # percentiles from every stride-th row in insertion order (spread over the whole range, not
        # its first rows); counts and weights exact, from SQL
        label = bucket.label("bucket")
        exact = (
            select(label, func.count(), func.sum(func.coalesce(Sample.sample_weight, 1.0)))
            .where(*conditions)
            .group_by(label)
        )
        count, weighted = np.zeros(n, dtype=np.int64), np.zeros(n)
        for b, rows_in, weight in session.connection().execute(exact).all():
            if 0 <= b < n:
                count[b], weighted[b] = rows_in, weight
        stride = -(-int(count.sum()) // MAX_SAMPLE_ROWS)
        table = _read_traffic(session, bucket, conditions, stride)
        idx = table[:, 0].astype(np.int64)
    found = {
        m: bucket_quantiles(idx, table[:, 1 + i], n, quantiles)
        for i, m in enumerate(TRAFFIC_METRICS)
    }
    return TrafficBuckets(count, weighted, found)


def _read_traffic(
    session: Session, bucket: ColumnElement[int], conditions: list, stride: int
) -> np.ndarray:
    """Rows of (bucket, metrics..., weight) as floats, at most MAX_SAMPLE_ROWS + 1; with
    stride > 1 only the rows whose SQLite rowid is a multiple of it."""
    inf = float(
        "inf"
    )  # a missing value comes back as inf: plain floats for np.fromiter, then skipped
    columns = [
        bucket,
        *(func.coalesce(getattr(Sample, m), inf) for m in TRAFFIC_METRICS),
        func.coalesce(Sample.sample_weight, 1.0),
    ]
    where = list(conditions)
    if stride > 1:
        where.append(literal_column("samples.rowid") % stride == 0)
    result = session.connection().execute(select(*columns).where(*where).limit(MAX_SAMPLE_ROWS + 1))
    width = len(columns)
    # small chunks, each turned into floats and dropped: tens of thousands of row objects alive at
    # once are promoted and set off full garbage collections of the whole process (~200 ms each)
    parts = [
        np.fromiter(itertools.chain.from_iterable(part), dtype=np.float64, count=width * len(part))
        for part in result.partitions(ROW_CHUNK)
    ]
    return np.concatenate(parts).reshape(-1, width) if parts else np.empty((0, width))
