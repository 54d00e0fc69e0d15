"""Read-only queries behind the dashboards and the sidecar's /metrics: drift runs and results,
eval means, open alerts, outbox and job backlogs. The charts' per-bucket aggregates are in
`storage/repositories/series_buckets.py`.

Every query is bounded by a time range and a row cap, so a page load or a Prometheus scrape
costs the same after a year of history as after a day.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, exists, func, or_, select
from sqlalchemy.orm import Session

from storage.models import (
    Alert,
    Delivery,
    DriftResult,
    DriftRun,
    Embedding,
    EvalScore,
    Incident,
    Sample,
)
from storage.repositories._sql import chunked
from storage.types import to_utc

MAX_RUNS = 2000  # 30 days of hourly runs is 720
MAX_RESULT_ROWS = 100_000
BACKLOG_CAP = 100_000  # a backlog past this is reported as the cap: the scrape stays cheap
# a ResultPoint's fields, in its order
RESULT_COLUMNS = (
    DriftResult.run_id,
    DriftResult.test,
    DriftResult.feature,
    DriftResult.segment,
    DriftResult.statistic,
    DriftResult.p_value,
    DriftResult.threshold,
    DriftResult.drifted,
    DriftResult.insufficient,
)


def result_filter(
    test: str | None, feature: str | None, segment: str | None
) -> list[ColumnElement[bool]]:
    """Conditions for results of one test / feature / segment (None: any)."""
    wanted = (
        (DriftResult.test, test),
        (DriftResult.feature, feature),
        (DriftResult.segment, segment),
    )
    return [column == value for column, value in wanted if value is not None]


@dataclass(frozen=True)
class RunPoint:
    run_id: int
    window_start: datetime
    window_end: datetime
    status: str
    num_samples: int
    baseline_id: int | None


@dataclass(frozen=True)
class ResultPoint:
    run_id: int
    test: str
    feature: str
    segment: str
    statistic: float | None
    p_value: float | None
    threshold: float | None
    drifted: bool
    insufficient: bool


def run_filter(
    start: datetime, end: datetime, *, baseline_id: int | None = None, status: str | None = "done"
) -> list[ColumnElement[bool]]:
    """The runs a chart shows: window end in (start, end], of one baseline and status."""
    conditions = [DriftRun.window_end > to_utc(start), DriftRun.window_end <= to_utc(end)]
    if baseline_id is not None:
        conditions.append(DriftRun.baseline_id == baseline_id)
    if status is not None:
        conditions.append(DriftRun.status == status)
    return conditions


def runs_between(
    session: Session,
    start: datetime,
    end: datetime,
    *,
    baseline_id: int | None = None,
    status: str | None = "done",
    limit: int = MAX_RUNS,
) -> list[RunPoint]:
    """Runs whose window ends in (start, end], oldest first (the newest `limit` of them)."""
    query = select(
        DriftRun.id,
        DriftRun.window_start,
        DriftRun.window_end,
        DriftRun.status,
        DriftRun.num_samples,
        DriftRun.baseline_id,
    ).where(*run_filter(start, end, baseline_id=baseline_id, status=status))
    rows = session.execute(
        query.order_by(DriftRun.window_end.desc(), DriftRun.id.desc()).limit(limit)
    )
    points = [
        RunPoint(rid, to_utc(ws), to_utc(we), st, n or 0, bid) for rid, ws, we, st, n, bid in rows
    ]
    return points[::-1]


def results_for_runs(
    session: Session,
    run_ids: Sequence[int],
    *,
    test: str | None = None,
    feature: str | None = None,
    segment: str | None = None,
    limit: int = MAX_RESULT_ROWS,
) -> list[ResultPoint]:
    """Results of the given runs, optionally of one test / feature / segment."""
    out: list[ResultPoint] = []
    for ids in chunked(run_ids, 500):
        query = select(*RESULT_COLUMNS).where(
            DriftResult.run_id.in_(ids), *result_filter(test, feature, segment)
        )
        remaining = limit - len(out)
        if remaining <= 0:
            break
        # Core execution: no ORM row processing for what may be tens of thousands of rows
        out += [
            ResultPoint(*row) for row in session.connection().execute(query.limit(remaining)).all()
        ]
    return out


def latest_done_run(session: Session) -> RunPoint | None:
    row = session.scalars(
        select(DriftRun)
        .where(DriftRun.status == "done")
        .order_by(DriftRun.window_end.desc())
        .limit(1)
    ).first()
    if row is None:
        return None
    return RunPoint(
        row.id,
        to_utc(row.window_start),
        to_utc(row.window_end),
        row.status,
        row.num_samples or 0,
        row.baseline_id,
    )


def open_alert_counts(session: Session) -> dict[tuple[str, str], int]:
    """Open alerts per (severity, kind)."""
    rows = session.execute(
        select(Alert.severity, Alert.kind, func.count())
        .where(Alert.status == "open")
        .group_by(Alert.severity, Alert.kind)
    )
    return {(severity, kind): int(n) for severity, kind, n in rows}


def open_incident_counts(session: Session) -> dict[tuple[str, bool], int]:
    """Open incidents per (severity, acknowledged)."""
    acknowledged = Incident.acknowledged_at.is_not(None)
    rows = session.execute(
        select(Incident.severity, acknowledged, func.count())
        .where(Incident.status == "open")
        .group_by(Incident.severity, acknowledged)
    )
    return {(severity, bool(ack)): int(n) for severity, ack, n in rows}


def delivery_counts(session: Session) -> dict[tuple[str, str], int]:
    """Outbox rows per (status, format)."""
    rows = session.execute(
        select(Delivery.status, Delivery.format, func.count()).group_by(
            Delivery.status, Delivery.format
        )
    )
    return {(status, fmt): int(n) for status, fmt, n in rows}


def drift_run_counts(session: Session, since: datetime) -> dict[str, int]:
    """Drift runs started since `since`, per status (running, done, failed)."""
    rows = session.execute(
        select(DriftRun.status, func.count())
        .where(DriftRun.started_at >= to_utc(since))
        .group_by(DriftRun.status)
    )
    return {status: int(n) for status, n in rows}


def eval_means(session: Session, since: datetime) -> dict[str, tuple[float, int]]:
    """Mean score and count per evaluator over scores written since `since`."""
    rows = session.execute(
        select(EvalScore.name, func.avg(EvalScore.score), func.count())
        .where(EvalScore.created_at >= to_utc(since))
        .group_by(EvalScore.name)
    )
    return {name: (float(mean), int(n)) for name, mean, n in rows if mean is not None}


def embed_backlog(session: Session, model: str, *, cap: int = BACKLOG_CAP) -> int:
    """Samples with text and no embedding by `model` yet (at most `cap` are counted)."""
    has_any = exists().where(Embedding.sample_id == Sample.id, Embedding.model == model)
    has_text = or_(Sample.prompt.is_not(None), Sample.response.is_not(None))
    inner = select(Sample.id).where(~has_any, has_text).limit(cap).subquery()
    return int(session.scalar(select(func.count()).select_from(inner)) or 0)


def arrived_after(session: Session, after: datetime | None, *, cap: int = BACKLOG_CAP) -> int:
    """Samples that arrived (ingested_at) after `after`, or all of them: a cursor job's backlog."""
    query = select(Sample.id)
    if after is not None:
        query = query.where(Sample.ingested_at > to_utc(after))
    inner = query.limit(cap).subquery()
    return int(session.scalar(select(func.count()).select_from(inner)) or 0)
