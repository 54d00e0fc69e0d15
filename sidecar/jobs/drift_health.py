"""The drift job watching itself: silence must mean "no drift", never "nothing ran".

A failed window raises `monitor_window_failed` (retried up to MAX_ATTEMPTS claims); a report
that cannot be written raises `monitor_report_failed` while the run's results and alerts stand;
a window
given up (MAX_ATTEMPTS claims, or input it cannot read) is marked `skipped`, the cursor moves
past it and the alert says so; windows checked without an active baseline raise a `review`
reminder, against one that is not validated a page. Each resolves once the cause is gone (the
next clean window, or activation in sidecar.jobs.baselines).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from alerts.service import raise_condition
from sidecar.cursors import set_cursor
from sidecar.jobs.windows import CURSOR
from storage.models import DriftRun
from storage.repositories.drift_runs import finish_drift_run
from storage.types import to_utc
from vigil.config import Settings

log = logging.getLogger("vigil.sidecar.drift")

MAX_ATTEMPTS = 3  # claims of one window before the job gives it up (the run becomes `skipped`)
WINDOW_FAILED = "monitor_window_failed"
NO_BASELINE = "monitor_no_baseline"  # none active yet: a reminder (review), not a page
BASELINE_INVALID = "monitor_baseline_invalid"  # the active one is not validated: a page
REPORT_FAILED = "monitor_report_failed"


def report_or_alert(
    session: Session,
    settings: Settings,
    run_id: int,
    now: datetime,
    write: Callable[[], Path],
    *,
    resolve: bool,
) -> Path | None:
    """The run's report, written by `write`; when that fails the run's results and alerts still
    stand (the caller commits them): the failure becomes its own `monitor_report_failed` alert
    and None is returned. `resolve`: a report written resolves an open one."""
    try:
        path = write()
    except Exception as exc:  # noqa: BLE001 - any rendering failure must not cost the run
        log.exception("drift run %s: the report could not be written", run_id)
        error = f"{exc.__class__.__name__}: {exc}"[:300]
        raise_condition(
            session, REPORT_FAILED, healthy=False, now=now, settings=settings,
            evidence={"run_id": run_id, "error": error},
            summary=f"The drift report of run {run_id} could not be written ({error}); "
            "the run's results and alerts stand.",
        )  # fmt: skip
        return None
    if resolve:
        raise_condition(session, REPORT_FAILED, healthy=True, now=now, settings=settings)
    return path


def give_up_after_failure(
    settings: Settings,
    session_factory: sessionmaker[Session],
    start: datetime,
    end: datetime,
    exc: Exception,
    now: datetime,
) -> bool:
    """Mark the window's run failed and raise the monitoring alert; give the window up (run
    `skipped`, cursor past it) after MAX_ATTEMPTS claims, or at once when its input cannot be
    read (retrying cannot help): a window that always fails must not block every later hour.
    True if given up."""
    from drift.errors import InputError

    error = f"{exc.__class__.__name__}: {exc}"[:500]
    try:
        with session_factory() as session:
            run = session.scalars(
                select(DriftRun).where(DriftRun.window_start == start, DriftRun.window_end == end)
            ).first()
            attempts = run.attempts if run is not None else 1
            give_up = attempts >= MAX_ATTEMPTS or isinstance(exc, InputError)
            if run is not None and run.status == "running":
                finish_drift_run(
                    session,
                    run.id,
                    status="skipped" if give_up else "failed",
                    summary={"error": error, "attempts": attempts},
                    now=now,
                )
            if give_up:
                log.error(
                    "drift window %s → %s failed %d times (%s); skipping it",
                    start,
                    end,
                    attempts,
                    error,
                )
                set_cursor(session, CURSOR, to_utc(end).isoformat(), now)
            _window_failed(
                session,
                settings,
                start,
                end,
                attempts=attempts,
                error=error,
                given_up=give_up,
                now=now,
            )
            session.commit()
            return give_up
    except Exception:  # e.g. the database is down: the original error is what matters
        log.exception("could not record the drift failure")
        return False


def _window_failed(
    session: Session,
    settings: Settings,
    start: datetime,
    end: datetime,
    *,
    attempts: int,
    error: str,
    given_up: bool,
    now: datetime,
) -> None:
    what = (
        "skipped, never checked" if given_up else f"will be retried ({attempts} of {MAX_ATTEMPTS})"
    )
    raise_condition(
        session, WINDOW_FAILED, healthy=False, now=now, settings=settings,
        summary=f"drift window {start:%Y-%m-%d %H:%M} → {end:%H:%M} UTC failed: {error}; {what}",
        evidence={"window_start": to_utc(start).isoformat(), "window_end": to_utc(end).isoformat(),
                  "attempts": attempts, "max_attempts": MAX_ATTEMPTS, "error": error,
                  "given_up": given_up},
    )  # fmt: skip


def give_up_exhausted(
    session: Session,
    settings: Settings,
    run: DriftRun,
    start: datetime,
    end: datetime,
    now: datetime,
) -> None:
    """Earlier claims of this window all died before finishing (the job was killed in it):
    stop claiming it, say so, move on."""
    error = f"the job died in this window {run.attempts} times (killed or out of memory?)"
    log.error("drift window %s → %s: %s; skipping it", start, end, error)
    finish_drift_run(session, run.id, status="skipped",
                     summary={"error": error, "attempts": run.attempts}, now=now)  # fmt: skip
    set_cursor(session, CURSOR, to_utc(end).isoformat(), now)
    _window_failed(
        session, settings, start, end, attempts=run.attempts, error=error, given_up=True, now=now
    )
    session.commit()


def report_baseline_health(
    session: Session, settings: Settings, active: Any, baseline: Any, now: datetime
) -> None:
    """While windows are checked against no active, valid baseline (silence would look like "no
    drift"): a fresh install without one gets a `review` reminder, an active baseline that is
    not validated pages. Each resolves once there is one (also at activation,
    sidecar.jobs.baselines)."""
    invalid = active is not None and (baseline is None or not baseline.valid)
    raise_condition(session, NO_BASELINE, healthy=active is not None, now=now, settings=settings,
                    summary="no active baseline yet: drift is not measured; build, validate "
                            "and activate one on /baselines (or vigil baseline ...)")  # fmt: skip
    raise_condition(session, BASELINE_INVALID, healthy=not invalid, now=now, settings=settings,
                    summary="drift results are not trustworthy: the active baseline "
                            f"#{active.id if active else '-'} is not validated",
                    evidence={"baseline_id": active.id if active else None})  # fmt: skip
