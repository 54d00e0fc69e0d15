"""The drift job's middle step for one window: the window's frame against the active baseline
(drift.run.run_drift), the cause, and what the run's summary and report say. Reads only; the
job (sidecar.jobs.drift) claims the window before and commits everything after."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import pandas as pd
from sqlalchemy.orm import Session

from dashboards.report.build import evidently_part, segment_counts
from sidecar.jobs.baselines import load_baseline_with_frame
from sidecar.jobs.coverage import Coverage
from sidecar.jobs.drift_cause import run_cause
from sidecar.jobs.eval_frame import trailing_eval_frame
from sidecar.jobs.window_evidence import load_evidence
from storage.models import Baseline as BaselineRow
from storage.types import to_utc
from vigil.config import Settings

NO_BASELINE = "No active baseline: build, validate and activate one (vigil baseline ...)."


@dataclass
class WindowWork:
    """What one window's drift check produced, before anything is stored."""

    frame: pd.DataFrame
    baseline: Any = None  # drift.baseline.build.Baseline when one is active
    base_frame: pd.DataFrame | None = None
    evals: pd.DataFrame | None = None
    evidence: Any = None  # drift.streams.window_evidence.WindowEvidence (scheduled windows only)
    results: list[dict[str, Any]] = field(default_factory=list)
    sizes: dict[str, dict[str, int]] = field(default_factory=dict)
    proposed: list[Any] = field(default_factory=list)
    cause: dict[str, Any] | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    note: str | None = None
    evidently: Any = None


def compute_window(
    session: Session,
    settings: Settings,
    active: BaselineRow | None,
    frame: pd.DataFrame,
    coverage: Coverage,
    *,
    start: datetime,
    end: datetime,
    run_id: int,
    advance_cursor: bool,
) -> WindowWork:
    from drift.features.segments import DEFAULT_SEGMENT_BY

    work = WindowWork(frame)
    if active is None:
        work.note = NO_BASELINE
    else:
        work.baseline, work.base_frame = load_baseline_with_frame(session, active.id)
    # only the scheduled windows, in order, add to the evidence across windows
    if active is not None and advance_cursor:
        work.evidence = load_evidence(session, active.id, settings)
    partial = coverage.sentence()
    if work.baseline is not None and len(frame):
        _run(work, session, settings, start, end, run_id, partial)
    else:
        work.sizes = segment_counts(frame, DEFAULT_SEGMENT_BY)
        work.summary = {"n_current": len(frame), "note": work.note or "the window holds no samples"}
    work.summary["vectors"] = coverage.to_dict()
    if partial:
        said = f"{partial[0].upper()}{partial[1:]}."
        work.note = f"{work.note} {said}" if work.note else said
    work.evidently = evidently_part(
        frame, work.base_frame, max_rows=settings.report_max_rows, seed=run_id
    )
    return work


def _run(
    work: WindowWork,
    session: Session,
    settings: Settings,
    start: datetime,
    end: datetime,
    run_id: int,
    partial: str | None,
) -> None:
    from drift.features.segments import DEFAULT_SEGMENT_BY
    from drift.run import run_drift

    evals = trailing_eval_frame(session, end, settings.drift_eval_max_samples)
    work.evals = evals
    report = run_drift(
        work.baseline, work.frame, segment_by=DEFAULT_SEGMENT_BY,
        rng_seed=int(to_utc(start).timestamp()) % 2**31,
        eval_frame=evals if len(evals) else None, evidence=work.evidence,
    )  # fmt: skip
    work.results = [r.to_dict() for r in report.results]
    work.sizes = report.segments
    work.proposed = [
        replace(a, evidence={**a.evidence, "vectors": partial}) if partial else a
        for a in report.alerts
    ]
    work.cause = run_cause(
        work.results, work.sizes, work.proposed, work.frame, work.base_frame, seed=run_id
    )
    work.summary = {"n_current": report.n_current, "baseline_valid": report.baseline_valid,
                    "baseline_reasons": report.baseline_reasons,
                    "timings": report.timings}  # fmt: skip
