"""Drift runs (one per window) and their results (one row per test x feature x segment)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from storage.models import DriftResult, DriftRun
from storage.repositories._sql import insert_ignore, opt_float, to_jsonable
from storage.types import to_utc, utcnow

RUN_STATUSES = ("running", "done", "failed", "skipped")
FINAL_STATUSES = ("done", "skipped")  # skipped: given up after too many attempts, never redone


@dataclass
class DriftResultRow:
    """One test outcome to persist (the shape every detector returns, plus where it applies)."""

    test: str
    feature: str
    segment: str = "*"
    statistic: float | None = None
    p_value: float | None = None
    threshold: float | None = None
    drifted: bool = False
    insufficient: bool = False
    detail: dict[str, Any] | None = None


@dataclass
class Claim:
    """The outcome of claiming a window: `claimed` (run is `running`, attempts counted), `done`
    (finished or given up before: never redone) or `exhausted` (claimed `max_attempts` times
    without finishing — the caller gives it up; run is left as it was)."""

    state: str  # claimed | done | exhausted
    run: DriftRun


def claim_drift_run(
    session: Session,
    window_start: datetime,
    window_end: datetime,
    baseline_id: int | None = None,
    *,
    now: datetime | None = None,
    max_attempts: int | None = None,
) -> Claim:
    """Claim the run for [window_start, window_end) — one row per window (unique) — and count
    the attempt in the same transaction, before any work: a job killed mid-window (SIGKILL, out
    of memory) leaves its attempt counted, so a window that always kills the job ends as
    `exhausted` after `max_attempts` claims instead of being claimed forever.

    A previous `running` or `failed` run of the window is reset and its results deleted, so a
    re-run never duplicates results. Callers hold the scheduler leader lock; the insert itself
    is race-safe (ON CONFLICT DO NOTHING). Flushes; the caller commits."""
    start, end, when = to_utc(window_start), to_utc(window_end), now or utcnow()
    table = DriftRun.__table__
    created = insert_ignore(
        session, table,
        [{"baseline_id": baseline_id, "window_start": start, "window_end": end,
          "started_at": when, "status": "running", "num_samples": 0, "attempts": 1}],
        ["window_start", "window_end"], returning=table.c.id,
    )  # fmt: skip
    run = session.scalars(
        select(DriftRun)
        .where(DriftRun.window_start == start, DriftRun.window_end == end)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).one()
    if created:
        return Claim("claimed", run)
    if run.status in FINAL_STATUSES:
        return Claim("done", run)
    if max_attempts is not None and run.attempts >= max_attempts:
        return Claim("exhausted", run)
    # an older attempt (killed or failed): start over
    session.execute(delete(DriftResult.__table__).where(DriftResult.__table__.c.run_id == run.id))
    run.status, run.started_at, run.finished_at = "running", when, None
    run.baseline_id, run.summary, run.report_path = baseline_id, None, None
    run.attempts = (run.attempts or 0) + 1
    session.flush()
    return Claim("claimed", run)


def start_drift_run(
    session: Session,
    window_start: datetime,
    window_end: datetime,
    baseline_id: int | None = None,
    *,
    now: datetime | None = None,
) -> DriftRun | None:
    """`claim_drift_run` without an attempt limit: the run in status `running`, or None when
    the window already has a final (`done` or `skipped`) run."""
    claim = claim_drift_run(session, window_start, window_end, baseline_id, now=now)
    return claim.run if claim.state == "claimed" else None


def add_drift_results(session: Session, run_id: int, results: Iterable[DriftResultRow]) -> int:
    """Append results to a run (numpy scalars, NaN -> NULL handled). Returns how many."""
    rows = [
        {"run_id": run_id, "test": r.test, "feature": r.feature, "segment": r.segment or "*",
         "statistic": opt_float(r.statistic), "p_value": opt_float(r.p_value),
         "threshold": opt_float(r.threshold), "drifted": bool(r.drifted),
         "insufficient": bool(r.insufficient), "detail": to_jsonable(r.detail)}
        for r in results
    ]  # fmt: skip
    if rows:
        session.execute(DriftResult.__table__.insert(), rows)
    return len(rows)


def finish_drift_run(
    session: Session,
    run_id: int,
    *,
    status: str = "done",
    num_samples: int | None = None,
    summary: dict[str, Any] | None = None,
    report_path: str | None = None,
    now: datetime | None = None,
) -> DriftRun:
    """Mark a run `done` (or `failed`) with its sample count, summary and report path."""
    if status not in RUN_STATUSES:
        raise ValueError(f"status must be one of {RUN_STATUSES}, got {status!r}")
    run = session.get(DriftRun, run_id)
    if run is None:
        raise ValueError(f"no drift run with id {run_id}")
    run.status, run.finished_at = status, now or utcnow()
    if num_samples is not None:
        run.num_samples = int(num_samples)
    if summary is not None:
        run.summary = to_jsonable(summary)
    if report_path is not None:
        run.report_path = str(report_path)
    session.flush()
    return run


def get_drift_run(session: Session, run_id: int) -> DriftRun | None:
    return session.get(DriftRun, run_id)


def list_drift_runs(
    session: Session, *, limit: int = 50, status: str | None = None
) -> list[DriftRun]:
    """Runs, newest window first."""
    query = select(DriftRun).order_by(DriftRun.window_end.desc(), DriftRun.id.desc()).limit(limit)
    if status is not None:
        query = query.where(DriftRun.status == status)
    return list(session.scalars(query))


def latest_drift_run(session: Session, status: str | None = "done") -> DriftRun | None:
    """The run with the latest window (of `status`; any status if None)."""
    runs = list_drift_runs(session, limit=1, status=status)
    return runs[0] if runs else None


def get_drift_results(
    session: Session, run_id: int, *, segment: str | None = None, drifted_only: bool = False
) -> list[DriftResult]:
    """A run's results ordered by (segment, test, feature)."""
    query = select(DriftResult).where(DriftResult.run_id == run_id)
    if segment is not None:
        query = query.where(DriftResult.segment == segment)
    if drifted_only:
        query = query.where(DriftResult.drifted.is_(True))
    return list(
        session.scalars(query.order_by(DriftResult.segment, DriftResult.test, DriftResult.feature))
    )
