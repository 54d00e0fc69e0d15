"""Drift job: each complete window since the last run against the ACTIVE validated baseline.

Windows are aligned to Settings.drift_interval_s (e.g. whole hours); the cursor in
`job_cursors` names the end of the last finished window. One window, crash-safe:

1. claim the run (`claim_drift_run`: one row per window, unique; a killed attempt's row is
   reset) and count the attempt, then commit — the run is visibly `running`, and a job that
   dies in the window (SIGKILL, out of memory) has still used one of its MAX_ATTEMPTS;
2. load the window (at most Settings.drift_max_window_rows rows, stratified by segment; the
   vectors of a nested subset of Settings.drift_max_embedded_rows of them) and the baseline,
   run drift.run.run_drift (pure, seeded per window);
3. ONE transaction: results, alerts (`raise_alerts`: dedupe + outbox enqueue), report path,
   run `done`, cursor moved. A SIGKILL anywhere before that commit leaves no alert and no
   result behind, and the restarted job redoes the window; after it, the window is done and
   is never redone — so no duplicate alert, and samples are only ever read.

The monitor never goes silent about itself: a failed window, a window given up (MAX_ATTEMPTS
claims, or input it cannot read) and a window checked without an active valid baseline each
raise a `monitoring` alert (`raise_condition`), resolved by the next window that runs clean
(sidecar.jobs.drift_health).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from alerts.service import raise_alerts, raise_condition
from dashboards.report.build import write_run_report
from sidecar.cursors import set_cursor
from sidecar.embedded_rows import embedded_rows_cap
from sidecar.jobs.coverage import vector_coverage
from sidecar.jobs.drift_cause import incident_view
from sidecar.jobs.drift_health import (
    MAX_ATTEMPTS,
    WINDOW_FAILED,
    give_up_after_failure,
    give_up_exhausted,
    report_baseline_health,
    report_or_alert,
)
from sidecar.jobs.drift_window import WindowWork, compute_window
from sidecar.jobs.embed import model_name, run_embed_job
from sidecar.jobs.window_evidence import save_evidence
from sidecar.jobs.windows import CURSOR, drift_cursor, due_windows
from storage.models import Baseline as BaselineRow
from storage.models import DriftRun
from storage.repositories.baselines import get_active_baseline
from storage.repositories.drift_runs import (
    DriftResultRow,
    add_drift_results,
    claim_drift_run,
    finish_drift_run,
)
from storage.repositories.samples import read_window
from storage.types import to_utc
from vigil.config import Settings

log = logging.getLogger("vigil.sidecar.drift")


@dataclass
class WindowOutcome:
    window_start: datetime
    window_end: datetime
    run_id: int | None
    # done | skipped (already done) | lost (another replica finished it) | failed (given up
    # after an error) | gave_up (earlier attempts died without finishing)
    status: str
    num_samples: int = 0
    alerts: list[int] = field(default_factory=list)
    report_path: str | None = None


@dataclass
class DriftJobResult:
    windows: list[WindowOutcome]


def run_drift_job(
    settings: Settings, session_factory: sessionmaker[Session], now: datetime
) -> DriftJobResult:
    with session_factory() as session:
        cursor = drift_cursor(session)
    windows = due_windows(cursor, now, settings.drift_interval_s)
    if windows:  # the window's last read rows may still wait for the minutely embed job
        run_embed_job(settings, session_factory, now, windows=windows)
    outcomes = []
    for start, end in windows:
        try:
            outcomes.append(
                run_window(settings, session_factory, start, end, now=now, advance_cursor=True)
            )
        except Exception as exc:
            if not give_up_after_failure(settings, session_factory, start, end, exc, now):
                raise  # the window stays due: the next run retries it
            outcomes.append(WindowOutcome(start, end, None, "failed"))
    return DriftJobResult(outcomes)


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
    with session_factory() as session:
        active = get_active_baseline(session)
        claimed = _claim(session, settings, active, start, end, now, advance_cursor)
        if isinstance(claimed, WindowOutcome):
            return claimed
        run_id, claimed_at = claimed
        read = read_window(
            session, start, end, embedding_model=model_name(settings), with_extra=False,
            max_rows=settings.drift_max_window_rows,
            max_embedded_rows=embedded_rows_cap(settings),
            min_per_segment=settings.drift_min_rows_per_segment,
        )  # fmt: skip
        frame = pd.DataFrame(read.records)
        # a lagging embed job leaves rows without vectors
        work = compute_window(
            session, settings, active, frame, vector_coverage(frame, read.vector_ids),
            start=start, end=end, run_id=run_id, advance_cursor=advance_cursor,
        )  # fmt: skip
        if not _still_ours(session, run_id, claimed_at):
            session.rollback()  # another replica re-claimed the window meanwhile: it owns it now
            return WindowOutcome(start, end, run_id, "lost")
        fired, path = _store(session, settings, work, active, run_id, (start, end), now,
                             resolve_absent)  # fmt: skip
        if advance_cursor:
            set_cursor(session, CURSOR, to_utc(end).isoformat(), now)
        if work.evidence is not None:
            save_evidence(session, work.evidence, now)
        session.commit()
        log.info("drift run %s done: %d samples, %d drifted results, %d alerts, report %s",
                 run_id, len(frame), work.summary["drifted"], len(fired), path)  # fmt: skip
        report = str(path) if path else None
        return WindowOutcome(start, end, run_id, "done", len(frame), [a.id for a in fired], report)


def _claim(
    session: Session,
    settings: Settings,
    active: BaselineRow | None,
    start: datetime,
    end: datetime,
    now: datetime,
    advance_cursor: bool,
) -> WindowOutcome | tuple[int, datetime]:
    """Claim the window's run and commit the attempt; an outcome when there is nothing to do."""
    claim = claim_drift_run(
        session,
        start,
        end,
        active.id if active else None,
        now=now,
        max_attempts=MAX_ATTEMPTS if advance_cursor else None,
    )
    if claim.state == "done":  # already done (e.g. by the previous leader): move the cursor on
        if advance_cursor:
            set_cursor(session, CURSOR, to_utc(end).isoformat(), now)
        session.commit()
        return WindowOutcome(start, end, None, "skipped")
    if claim.state == "exhausted":
        give_up_exhausted(session, settings, claim.run, start, end, now)
        return WindowOutcome(start, end, claim.run.id, "gave_up")
    run_id, claimed_at, attempt = claim.run.id, claim.run.started_at, claim.run.attempts
    session.commit()  # the attempt counts from here, whatever happens to this process
    log.info("drift run %s claimed for window %s → %s (attempt %d)", run_id, start, end, attempt)
    return run_id, claimed_at


def _still_ours(session: Session, run_id: int, claimed_at: datetime) -> bool:
    """Lock the run row: the one transaction that makes the window done starts here (kept
    short: SQLite has one writer)."""
    current = session.scalars(
        select(DriftRun)
        .where(DriftRun.id == run_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).one()
    return current.status == "running" and current.started_at == claimed_at


def _store(
    session: Session,
    settings: Settings,
    work: WindowWork,
    active: BaselineRow | None,
    run_id: int,
    window: tuple[datetime, datetime],
    now: datetime,
    resolve_absent: bool,
) -> tuple[list[Any], object]:
    """Results, alerts, report and the finished run, in the caller's transaction."""
    results, summary = work.results, work.summary
    add_drift_results(session, run_id, [DriftResultRow(
        test=r["test"], feature=r["feature"] or "*", segment=r["segment"],
        statistic=r["statistic"],
        p_value=r["p_value"], threshold=r["threshold"], drifted=r["drifted"],
        insufficient=r["insufficient"], detail=r["detail"]) for r in results])  # fmt: skip
    fired = (
        raise_alerts(session, work.proposed, run_id=run_id, now=now, settings=settings,
                     resolve_absent=resolve_absent, cause=work.cause)
        if work.baseline else []
    )  # fmt: skip
    incident = incident_view(session, fired, settings.public_url)
    path = report_or_alert(session, settings, run_id, now, lambda: write_run_report(
        run_id=run_id, window=window, now=now, frame=work.frame, baseline_row=active,
        baseline_frame=work.base_frame, results=results, segment_sizes=work.sizes, alerts=fired,
        report_dir=settings.report_dir, public_url=settings.public_url,
        evidently=work.evidently, note=work.note, eval_frame=work.evals, incident=incident,
    ), resolve=resolve_absent)  # fmt: skip
    if resolve_absent:  # the scheduled job: report on the monitor's own health
        report_baseline_health(session, settings, active, work.baseline, now)
        raise_condition(session, WINDOW_FAILED, healthy=True, now=now, settings=settings)
    summary["alerts"] = [
        {"id": a.id, "rule": a.rule, "segment": a.segment, "severity": a.severity} for a in fired
    ]
    summary["cause"] = work.cause
    summary["segments"] = {
        label: {"n_current": int(v.get("n_current") or 0)}  # what pages weigh results by
        for label, v in (work.sizes or {}).items()
    }
    summary["drifted"] = sum(1 for r in results if r["drifted"])
    finish_drift_run(
        session, run_id, num_samples=len(work.frame), summary=summary,
        report_path=str(path) if path else None, now=now,
    )  # fmt: skip
    return fired, path
