"""Re-baselining after an expected change: for each open incident marked "this was expected",
once `rebaseline_min_samples` samples arrived after the change began (the incident's first
window), build a baseline from them, validate it and activate it, then resolve the incident
(`alerts.expected.rebaselined`). A baseline that fails validation is left as a candidate and the
incident stays open (the /baselines page shows why); the next run tries again with more
traffic. Baselines keep their own audit trail (built, validated, activated, with times)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from alerts.expected import awaiting_rebaseline, rebaselined
from storage.models import DriftRun, Incident, Sample
from storage.types import to_utc
from vigil.config import Settings

log = logging.getLogger("vigil.sidecar.rebaseline")


@dataclass
class RebaselineResult:
    activated: dict[int, int] = field(default_factory=dict)  # incident -> baseline
    waiting: dict[int, int] = field(default_factory=dict)  # incident -> samples so far
    rejected: dict[int, list[str]] = field(default_factory=dict)


def change_start(session: Session, incident: Incident) -> datetime:
    """When the change began: the start of the first window the incident was opened from."""
    first = session.scalars(
        select(DriftRun.window_start).where(DriftRun.window_end <= incident.first_seen)
        .order_by(DriftRun.window_end.desc()).limit(1)
    ).first()  # fmt: skip
    return to_utc(first) if first is not None else to_utc(incident.first_seen)


def run_rebaseline_job(
    settings: Settings, session_factory: sessionmaker[Session], now: datetime
) -> RebaselineResult:
    from sidecar.jobs.baselines import (
        activate_baseline,
        build_baseline_from_window,
        validate_stored_baseline,
    )

    out = RebaselineResult()
    with session_factory() as session:
        due = [(i.id, change_start(session, i)) for i in awaiting_rebaseline(session)]
        counts = {
            incident_id: session.scalar(
                select(func.count()).select_from(Sample)
                .where(Sample.timestamp >= start, Sample.timestamp < now)
            ) or 0
            for incident_id, start in due
        }  # fmt: skip
    for incident_id, start in due:
        if counts[incident_id] < settings.rebaseline_min_samples:
            out.waiting[incident_id] = counts[incident_id]
            continue
        built = build_baseline_from_window(settings, session_factory, start, now, now=now)
        check = validate_stored_baseline(settings, session_factory, built.baseline_id, now=now)
        if not check.valid:
            out.rejected[incident_id] = list(check.reasons)
            log.warning("re-baseline for incident %s rejected: %s", incident_id, check.reasons)
            continue
        activate_baseline(session_factory, built.baseline_id, now=now, settings=settings)
        with session_factory() as session, session.begin():
            incident = session.get(Incident, incident_id)
            if incident is not None and incident.status == "open":
                rebaselined(session, incident, baseline_id=built.baseline_id, now=now,
                            settings=settings)  # fmt: skip
        out.activated[incident_id] = built.baseline_id
    return out
