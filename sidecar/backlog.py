"""The embed and evaluate jobs' backlog as a monitoring condition: when the oldest sample a job
still has to handle arrived more than Settings.monitor_backlog_intervals of that job's
intervals ago, drift windows are being checked on stale or missing embeddings and eval scores —
a `monitor_backlog` alert (segment `job=<name>`), resolved once the job has caught up."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from alerts.service import raise_condition
from storage.types import to_utc
from vigil.config import Settings

log = logging.getLogger("vigil.sidecar.backlog")

RULE = "monitor_backlog"


def report_backlog(session: Session, settings: Settings, job: str, oldest: datetime | None,
                   interval_s: float, now: datetime) -> bool:
    """Raise or resolve the job's backlog alert; True when healthy. The caller commits."""
    limit = timedelta(seconds=settings.monitor_backlog_intervals * interval_s)
    age = None if oldest is None else to_utc(now) - to_utc(oldest)
    healthy = age is None or age <= limit
    if not healthy:
        log.warning("%s backlog: the oldest waiting sample arrived %s ago (limit %s)", job, age, limit)
    raise_condition(
        session, RULE, f"job={job}", healthy=healthy, now=now, settings=settings,
        summary=None if healthy else (
            f"the {job} job is behind: its oldest waiting sample arrived {age.total_seconds() / 60:.0f} "
            f"min ago (limit {limit.total_seconds() / 60:.0f} min); drift runs on incomplete data"),
        evidence={"job": job, "oldest_waiting": None if oldest is None else to_utc(oldest).isoformat(),
                  "age_s": None if age is None else age.total_seconds(),
                  "limit_s": limit.total_seconds()},
    )  # fmt: skip
    return healthy
