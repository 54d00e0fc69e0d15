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


def report_backlog(
    session: Session,
    settings: Settings,
    job: str,
    oldest: datetime | None,
    interval_s: float,
    now: datetime,
    *,
    waiting: int | None = None,
    rate: float | None = None,
) -> bool:
    """Raise or resolve the job's backlog alert; True when healthy. `waiting` (items still to
    handle) and `rate` (items per second the job just managed) give the time to catch up.
    The caller commits."""
    limit = timedelta(seconds=settings.monitor_backlog_intervals * interval_s)
    age = None if oldest is None else to_utc(now) - to_utc(oldest)
    healthy = age is None or age <= limit
    catch_up_s = waiting / rate if waiting and rate else None
    if not healthy:
        log.warning(
            "%s backlog: the oldest waiting sample arrived %s ago (limit %s)", job, age, limit
        )
    raise_condition(
        session, RULE, f"job={job}", healthy=healthy, now=now, settings=settings,
        summary=None if healthy or age is None else backlog_summary(
            job, age.total_seconds(), limit.total_seconds(), catch_up_s),
        evidence={"job": job,
                  "oldest_waiting": None if oldest is None else to_utc(oldest).isoformat(),
                  "age_s": None if age is None else age.total_seconds(),
                  "limit_s": limit.total_seconds(), "waiting": waiting, "rate_per_s": rate,
                  "catch_up_s": catch_up_s},
    )  # fmt: skip
    return healthy


def backlog_summary(job: str, age_s: float, limit_s: float, catch_up_s: float | None) -> str:
    """The alert's sentence: how many minutes behind, and (when known) how long to catch up."""
    what = {
        "embed": "the oldest sample a drift window reads without a vector",
        "evaluate": "the oldest sample still to score",
    }.get(job, "the oldest waiting sample")
    text = (
        f"the {job} job is {_minutes(age_s)} behind: {what} arrived {_minutes(age_s)} ago "
        f"(limit {_minutes(limit_s)})"
    )
    if catch_up_s is not None:
        text += f"; at its last run's pace it needs about {_minutes(catch_up_s)} more to catch up"
    consequence = (
        "drift windows run on the rows embedded so far"
        if job == "embed"
        else "the eval trend runs on fewer scores"
    )
    return f"{text}; {consequence}"


def _minutes(seconds: float) -> str:
    return f"{max(seconds, 0) / 60:,.0f} min"
