"""Drift job: each complete window since the last run against the ACTIVE validated baseline.

Windows are aligned to Settings.drift_interval_s (e.g. whole hours); the cursor in
`job_cursors` names the end of the last finished window. One window, crash-safe:

1. claim the run (`start_drift_run`: one row per window, unique; a killed attempt's row is
   reset) and commit — the run is visibly `running`;
2. load the window and the baseline, run drift.job.run_drift (pure, seeded per window);
3. ONE transaction: results, alerts (`raise_alerts`: dedupe + outbox enqueue), report path,
   run `done`, cursor moved. A SIGKILL anywhere before that commit leaves no alert and no
   result behind, and the restarted job redoes the window; after it, the window is done and
   is never redone — so no duplicate alert, and samples are only ever read.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from alerts.service import raise_alerts
from dashboards.report.build import evidently_part, segment_counts, write_run_report
from sidecar.baselines import load_baseline_with_frame
from sidecar.cursors import get_cursor, set_cursor
from sidecar.jobs.embed import model_name, run_embed_job
from storage.models import DriftRun
from storage.repositories.baselines import get_active_baseline
from storage.repositories.drift_runs import (
    DriftResultRow,
    add_drift_results,
    finish_drift_run,
    start_drift_run,
)
from storage.repositories.eval_scores import load_eval_scores
from storage.repositories.samples import fetch_window
from storage.types import to_utc
from vigil.config import Settings

log = logging.getLogger("vigil.sidecar.drift")

CURSOR = "drift"
FAILURES_CURSOR = "drift:failures"
MAX_ATTEMPTS = 3  # failures of one window before the job moves on (the run stays `failed`)
MAX_CATCH_UP = 24  # windows; after a long outage older windows are skipped (logged)
EVAL_TREND_DAYS = 7


@dataclass
class WindowOutcome:
    window_start: datetime
    window_end: datetime
    run_id: int | None
    status: str  # done | skipped (already done) | lost (another replica finished it)
    num_samples: int = 0
    alerts: list[int] = field(default_factory=list)
    report_path: str | None = None


@dataclass
class DriftJobResult:
    windows: list[WindowOutcome]


def due_windows(cursor: datetime | None, now: datetime, interval_s: int) -> list[tuple[datetime, datetime]]:
    """Complete windows after `cursor`; without one, the last complete aligned window."""
    step = timedelta(seconds=interval_s)
    epoch = to_utc(now).timestamp()
    aligned = datetime.fromtimestamp(epoch - epoch % interval_s, UTC)
    start = to_utc(cursor) if cursor is not None else aligned - step
    windows = []
    while start + step <= to_utc(now):
        windows.append((start, start + step))
        start += step
    if len(windows) > MAX_CATCH_UP:
        log.warning("drift job skips %d old windows (more than %d missed)", len(windows) - MAX_CATCH_UP, MAX_CATCH_UP)
        windows = windows[-MAX_CATCH_UP:]
    return windows


def run_drift_job(settings: Settings, session_factory: sessionmaker[Session], now: datetime) -> DriftJobResult:
    with session_factory() as session:
        raw = get_cursor(session, CURSOR)
    cursor = to_utc(datetime.fromisoformat(raw)) if raw else None
    windows = due_windows(cursor, now, settings.drift_interval_s)
    if windows:  # the window's last samples may still wait for the minutely embed job
        run_embed_job(settings, session_factory, now)
    outcomes = []
    for start, end in windows:
        try:
            outcomes.append(run_window(settings, session_factory, start, end, now=now, advance_cursor=True))
        except Exception as exc:
            if not _give_up_after_failure(session_factory, start, end, exc, now):
                raise  # the window stays due: the next run retries it
            outcomes.append(WindowOutcome(start, end, None, "failed"))
    return DriftJobResult(outcomes)


def _give_up_after_failure(
    session_factory: sessionmaker[Session], start: datetime, end: datetime, exc: Exception, now: datetime
) -> bool:
    """Mark the window's run failed; after MAX_ATTEMPTS failures of one window move the cursor
    past it (a window that always fails must not block every later hour). True if given up."""
    error = f"{exc.__class__.__name__}: {exc}"[:500]
    try:
        with session_factory() as session:
            run = session.scalars(
                select(DriftRun).where(DriftRun.window_start == start, DriftRun.window_end == end)
            ).first()
            if run is not None and run.status == "running":
                finish_drift_run(session, run.id, status="failed", summary={"error": error}, now=now)
            raw = get_cursor(session, FAILURES_CURSOR)
            seen = json.loads(raw) if raw else {}
            attempts = seen.get("attempts", 0) + 1 if seen.get("window_end") == end.isoformat() else 1
            give_up = attempts >= MAX_ATTEMPTS
            if give_up:
                log.error("drift window %s → %s failed %d times (%s); skipping it", start, end, attempts, error)
                set_cursor(session, CURSOR, to_utc(end).isoformat(), now)
            value = {"window_end": end.isoformat(), "attempts": 0 if give_up else attempts}
            set_cursor(session, FAILURES_CURSOR, json.dumps(value), now)
            session.commit()
            return give_up
    except Exception:  # e.g. the database is down: the original error is what matters
        log.exception("could not record the drift failure")
        return False


def _eval_frame(session: Session, end: datetime) -> pd.DataFrame:
    """Trailing EVAL_TREND_DAYS of eval scores, one row per sample (eval_<name> columns)."""
    rows = load_eval_scores(session, end - timedelta(days=EVAL_TREND_DAYS), end)
    if not rows:
        return pd.DataFrame()
    long = pd.DataFrame([{"id": r.sample_id, "name": f"eval_{r.name}", "score": r.score,
                          "timestamp": r.timestamp.timestamp(), "segment": r.segment,
                          "tenant": r.tenant} for r in rows])  # fmt: skip
    wide = long.pivot_table(index=["id", "timestamp"], columns="name", values="score").reset_index()
    keys = long.drop_duplicates("id").set_index("id")[["segment", "tenant"]]
    return wide.join(keys, on="id")


def run_window(
    settings: Settings,
    session_factory: sessionmaker[Session],
    start: datetime,
    end: datetime,
    *,
    now: datetime,
    advance_cursor: bool,
    resolve_absent: bool = True,
) -> WindowOutcome:
    """Drift for one window [start, end), exactly once (see module doc). `resolve_absent`:
    open drift alerts this window does not fire are resolved (the scheduled job); an ad-hoc
    window (`vigil report`) leaves them alone."""
    from drift.job import DEFAULT_SEGMENT_BY, run_drift

    with session_factory() as session:
        active = get_active_baseline(session)
        run = start_drift_run(session, start, end, active.id if active else None, now=now)
        if run is None:  # already done (e.g. by the previous leader): only move the cursor on
            if advance_cursor:
                set_cursor(session, CURSOR, to_utc(end).isoformat(), now)
            session.commit()
            return WindowOutcome(start, end, None, "skipped")
        run_id, claimed_at = run.id, run.started_at
        session.commit()
        log.info("drift run %s claimed for window %s → %s", run_id, start, end)

        frame = pd.DataFrame(fetch_window(session, start, end, embedding_model=model_name(settings)))
        baseline = base_frame = None
        note = None
        if active is None:
            note = "No active baseline: build, validate and activate one (vigil baseline ...)."
        else:
            baseline, base_frame = load_baseline_with_frame(session, active.id)
        if baseline is not None and len(frame):
            evals = _eval_frame(session, end)
            report = run_drift(
                baseline, frame, segment_by=DEFAULT_SEGMENT_BY,
                rng_seed=int(to_utc(start).timestamp()) % 2**31,
                eval_frame=evals if len(evals) else None,
            )  # fmt: skip
            results = [r.to_dict() for r in report.results]
            sizes, proposed = report.segments, list(report.alerts)
            summary = {"n_current": report.n_current, "baseline_valid": report.baseline_valid,
                       "baseline_reasons": report.baseline_reasons, "timings": report.timings}  # fmt: skip
        else:
            results, proposed = [], []
            sizes = segment_counts(frame, DEFAULT_SEGMENT_BY)
            summary = {"n_current": len(frame), "note": note or "the window holds no samples"}

        evidently = evidently_part(frame, base_frame, max_rows=settings.report_max_rows, seed=run_id)

        # the one transaction that makes the window done (kept short: SQLite has one writer)
        current = session.scalars(
            select(DriftRun).where(DriftRun.id == run_id).with_for_update().execution_options(populate_existing=True)
        ).one()
        if current.status != "running" or current.started_at != claimed_at:
            session.rollback()  # another replica re-claimed the window meanwhile: it owns it now
            return WindowOutcome(start, end, run_id, "lost")
        add_drift_results(session, run_id, [DriftResultRow(
            test=r["test"], feature=r["feature"] or "*", segment=r["segment"], statistic=r["statistic"],
            p_value=r["p_value"], threshold=r["threshold"], drifted=r["drifted"],
            insufficient=r["insufficient"], detail=r["detail"]) for r in results])  # fmt: skip
        fired = (
            raise_alerts(session, proposed, run_id=run_id, now=now, settings=settings,
                         resolve_absent=resolve_absent)
            if baseline else []
        )  # fmt: skip
        path = write_run_report(
            run_id=run_id, window=(start, end), now=now, frame=frame, baseline_row=active,
            baseline_frame=base_frame, results=results, segment_sizes=sizes, alerts=fired,
            report_dir=settings.report_dir, public_url=settings.public_url,
            evidently=evidently, note=note,
        )  # fmt: skip
        summary["alerts"] = [{"id": a.id, "rule": a.rule, "segment": a.segment, "severity": a.severity} for a in fired]
        summary["drifted"] = sum(1 for r in results if r["drifted"])
        finish_drift_run(session, run_id, num_samples=len(frame), summary=summary, report_path=str(path), now=now)
        if advance_cursor:
            set_cursor(session, CURSOR, to_utc(end).isoformat(), now)
        session.commit()
        log.info("drift run %s done: %d samples, %d drifted results, %d alerts, report %s",
                 run_id, len(frame), summary["drifted"], len(fired), path)  # fmt: skip
        return WindowOutcome(start, end, run_id, "done", len(frame), [a.id for a in fired], str(path))
