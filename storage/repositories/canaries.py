"""Engine canaries: the active canary baseline (expected outputs + calibrated tolerances), and each
canary run with one result row per probe. Nothing here commits."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, exists, select, update
from sqlalchemy.orm import Session

from storage.models import CanaryBaseline, CanaryResult, CanaryRun
from storage.repositories._sql import affected_rows, to_jsonable
from storage.types import to_utc

RUN_STATUSES = ("running", "ok", "mismatch", "calibration", "failed")
COMPARED = ("ok", "mismatch")  # runs compared with a baseline: what the /metrics gauges read


@dataclass(frozen=True)
class CanaryResultRow:
    probe: str
    token_ids: list[int]
    token_hash: str
    logprobs: list[float]
    perplexity: float | None = None
    comparison: dict[str, Any] | None = None
    ok: bool | None = None


def activate_canary_baseline(
    session: Session,
    *,
    probe_set_version: str,
    model_version: str | None,
    engine: dict[str, Any] | None,
    expected: dict[str, Any],
    tolerances: dict[str, Any],
    calibration: dict[str, Any] | None,
    now: datetime,
) -> CanaryBaseline:
    """Record a new canary baseline as the active one; the previous active one is retired."""
    session.execute(
        update(CanaryBaseline).where(CanaryBaseline.status == "active").values(status="retired")
    )
    baseline = CanaryBaseline(
        created_at=to_utc(now), status="active", probe_set_version=probe_set_version,
        model_version=model_version, engine=to_jsonable(engine), expected=to_jsonable(expected),
        tolerances=to_jsonable(tolerances), calibration=to_jsonable(calibration),
    )  # fmt: skip
    session.add(baseline)
    session.flush()
    return baseline


def get_active_canary_baseline(session: Session) -> CanaryBaseline | None:
    return session.scalars(
        select(CanaryBaseline).where(CanaryBaseline.status == "active")
        .order_by(CanaryBaseline.id.desc()).limit(1)
    ).first()  # fmt: skip


def start_canary_run(
    session: Session,
    *,
    baseline_id: int | None,
    model_version: str | None,
    engine: dict[str, Any] | None,
    now: datetime,
) -> CanaryRun:
    run = CanaryRun(
        baseline_id=baseline_id,
        started_at=to_utc(now),
        status="running",
        model_version=model_version,
        engine=to_jsonable(engine),
    )
    session.add(run)
    session.flush()
    return run


def add_canary_results(session: Session, run_id: int, rows: Iterable[CanaryResultRow]) -> int:
    count = 0
    for row in rows:
        session.add(CanaryResult(
            run_id=run_id, probe=row.probe, token_ids=[int(t) for t in row.token_ids],
            token_hash=row.token_hash, logprobs=[float(x) for x in row.logprobs],
            perplexity=row.perplexity, comparison=to_jsonable(row.comparison), ok=row.ok,
        ))  # fmt: skip
        count += 1
    session.flush()
    return count


def finish_canary_run(
    session: Session, run: CanaryRun, *, status: str, summary: dict[str, Any] | None, now: datetime
) -> CanaryRun:
    if status not in RUN_STATUSES:
        raise ValueError(f"unknown canary run status {status!r}; known: {', '.join(RUN_STATUSES)}")
    run.status, run.summary, run.finished_at = status, to_jsonable(summary), to_utc(now)
    session.flush()
    return run


def list_canary_runs(session: Session, limit: int = 50) -> list[CanaryRun]:
    return list(session.scalars(select(CanaryRun).order_by(CanaryRun.id.desc()).limit(limit)))


def get_canary_results(session: Session, run_id: int) -> list[CanaryResult]:
    return list(session.scalars(
        select(CanaryResult).where(CanaryResult.run_id == run_id).order_by(CanaryResult.id)
    ))  # fmt: skip


def latest_compared_run(session: Session) -> CanaryRun | None:
    """The newest run compared with a baseline (status ok or mismatch)."""
    return session.scalars(
        select(CanaryRun)
        .where(CanaryRun.status.in_(COMPARED))
        .order_by(CanaryRun.id.desc())
        .limit(1)
    ).first()


def delete_canary_runs_older_than(session: Session, cutoff: datetime) -> int:
    """Retention: delete runs started before `cutoff` with their probe results, except the newest
    compared run (the gauges keep a value while canaries are off or failing). Returns the runs
    deleted. Results are deleted first, explicitly: the FK cascade is off on a SQLite connection
    without `PRAGMA foreign_keys`. Does not commit."""
    latest = latest_compared_run(session)
    old = select(CanaryRun.id).where(CanaryRun.started_at < to_utc(cutoff))
    if latest is not None:
        old = old.where(CanaryRun.id != latest.id)
    results, runs = CanaryResult.__table__, CanaryRun.__table__
    session.execute(delete(results).where(results.c.run_id.in_(old)))
    return affected_rows(session, delete(runs).where(runs.c.id.in_(old)))


def delete_retired_canary_baselines_older_than(session: Session, cutoff: datetime) -> int:
    """Retention: delete retired canary baselines (one is left behind by each calibration) created
    before `cutoff` that no canary run references; run after `delete_canary_runs_older_than`, so
    a baseline goes once its last kept run has. The active baseline is never deleted. Returns the
    baselines deleted. Does not commit."""
    baselines, runs = CanaryBaseline.__table__, CanaryRun.__table__
    in_use = exists().where(runs.c.baseline_id == baselines.c.id)
    spent = delete(baselines).where(
        baselines.c.status == "retired", baselines.c.created_at < to_utc(cutoff), ~in_use
    )
    return affected_rows(session, spent)
