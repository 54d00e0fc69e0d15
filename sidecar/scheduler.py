"""The sidecar's job schedule: APScheduler 3.x with its SQLAlchemy job store.

Schedules live in the database (`apscheduler_jobs`), so a restarted sidecar keeps each job's
next run time. Only the elected leader runs a started scheduler (see `leader.py`); standbys keep
theirs paused. Every job is a plain function `(settings, session_factory, now)`; the scheduler
stores a reference to `run_scheduled(name)`, which finds the live runtime in this process.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy import Engine, inspect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from sidecar import job_stats
from sidecar.leader import SCHEDULER_LOCK, lease_fence
from sidecar.watchdog import ScheduledJob, record_job_run, record_job_start
from vigil.config import Settings

log = logging.getLogger("vigil.sidecar.scheduler")

JOBSTORE_TABLE = "apscheduler_jobs"


@dataclass(frozen=True)
class JobSpec:
    name: str
    target: str  # "module:function" taking (settings, session_factory, now)
    interval_setting: str  # the Settings field holding its period in seconds
    aligned: bool = False  # fire just after each multiple of the interval (window boundaries)
    timeout_s: float = 1800.0  # a run may take this long before the stall watchdog calls it stuck


ALIGN_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def trigger_for(spec: JobSpec, seconds: int) -> IntervalTrigger:
    """Aligned jobs fire a short grace after each window closes (so the hourly report covers
    10:00-11:00 at ~11:00, not up to an hour later); the grace lets the last samples land."""
    if not spec.aligned:
        return IntervalTrigger(seconds=seconds, timezone=UTC)
    grace = min(60.0, seconds * 0.05)
    return IntervalTrigger(
        seconds=seconds, start_date=ALIGN_EPOCH + timedelta(seconds=grace), timezone=UTC
    )


JOBS: tuple[JobSpec, ...] = (
    JobSpec("embed", "sidecar.jobs.embed:run_embed_job", "embed_interval_s"),
    JobSpec("evaluate", "sidecar.jobs.evaluate:run_evaluate_job", "eval_interval_s"),
    JobSpec(
        "drift",
        "sidecar.jobs.drift:run_drift_job",
        "drift_interval_s",
        aligned=True,
        timeout_s=3600.0,
    ),
    JobSpec("retention", "sidecar.jobs.retention:run_retention_job", "retention_interval_s"),
    JobSpec("sequential", "sidecar.jobs.sequential:run_sequential_job", "sequential_interval_s"),
    JobSpec("canary", "sidecar.canary.job:run_canary_job", "canary_interval_s"),
    JobSpec("otlp_join", "sidecar.otlp.join_job:run_join_job", "otlp_join_interval_s"),
    JobSpec("escalate", "sidecar.jobs.escalate:run_escalation_job", "escalation_interval_s"),
    JobSpec("rebaseline", "sidecar.jobs.rebaseline:run_rebaseline_job", "rebaseline_interval_s"),
    JobSpec(
        "baseline_reminder",
        "sidecar.jobs.baseline_reminder:run_baseline_reminder_job",
        "retention_interval_s",
    ),
)
JOBS_BY_NAME = {spec.name: spec for spec in JOBS}


@dataclass
class Runtime:
    """What a scheduled job needs, registered once per process by the sidecar."""

    settings: Settings
    session_factory: sessionmaker[Session]
    holder: str
    is_leader: Callable[[], bool]


_runtime: Runtime | None = None
_run_lock = threading.Lock()


def register_runtime(runtime: Runtime | None) -> None:
    global _runtime
    _runtime = runtime


def resolve(target: str) -> Callable[..., Any]:
    module, func = target.split(":")
    job: Callable[..., Any] = getattr(importlib.import_module(module), func)
    return job


def run_scheduled(name: str) -> None:
    """The callable the job store persists: run job `name` if this replica still leads."""
    runtime = _runtime
    if runtime is None:
        log.warning("job %s fired with no sidecar runtime in this process; skipped", name)
        return
    spec = JOBS_BY_NAME[name]
    # one job at a time per process: a small CPU budget, and embed/evaluate share the model
    with _run_lock:
        if not runtime.is_leader():  # demoted since the trigger fired: the new leader runs it
            log.info("job %s skipped: %s is not the leader", name, runtime.holder)
            return
        started = datetime.now(UTC)
        record_job_start(runtime.session_factory, name, started)
        log.info("job %s started on %s", name, runtime.holder)
        try:
            with lease_fence(SCHEDULER_LOCK, runtime.holder):  # every commit re-checks the lease
                result = resolve(spec.target)(runtime.settings, runtime.session_factory, started)
        except Exception:
            log.exception(
                "job %s failed on %s; it runs again at its next interval", name, runtime.holder
            )
            _tally(name, started, ok=False)
            return
        took = _tally(name, started, ok=True)
    log.info("job %s done on %s in %.2fs: %s", name, runtime.holder, took, result)


def _tally(name: str, started: datetime, *, ok: bool) -> float:
    """Count the run for /metrics and for the stall watchdog; returns its duration in seconds."""
    finished = datetime.now(UTC)
    took = (finished - started).total_seconds()
    job_stats.record_run(name, ok=ok, seconds=took, finished_unix=finished.timestamp())
    runtime = _runtime
    if runtime is not None:  # in the database: a new leader sees when the job last ran
        record_job_run(runtime.session_factory, name, finished)
    return took


def scheduled_jobs(scheduler: BackgroundScheduler, settings: Settings) -> list[ScheduledJob]:
    """The jobs this scheduler holds, with their intervals (what the stall watchdog expects)."""
    held = {job.id for job in scheduler.get_jobs()} if scheduler.running else set()
    return [
        ScheduledJob(spec.name, float(getattr(settings, spec.interval_setting)), spec.timeout_s)
        for spec in JOBS
        if spec.name in held
    ]


def _create_jobstore_table(store: SQLAlchemyJobStore, engine: Engine) -> None:
    """Replicas starting together would race on APScheduler's CREATE TABLE (PostgreSQL says
    "already exists" to the loser and the sidecar would crash): create it here, tolerating
    exactly that race."""
    try:
        store.jobs_t.create(engine, checkfirst=True)
    except DBAPIError:
        if not inspect(engine).has_table(JOBSTORE_TABLE):
            raise


def build_scheduler(engine: Engine) -> BackgroundScheduler:
    store = SQLAlchemyJobStore(engine=engine, tablename=JOBSTORE_TABLE)
    _create_jobstore_table(store, engine)
    return BackgroundScheduler(
        jobstores={"default": store},
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        timezone=UTC,
    )


def ensure_jobs(scheduler: BackgroundScheduler, settings: Settings, *, run_now: bool) -> None:
    """Register every job once, keeping a persisted job's next run time unless its interval
    changed. `run_now` pulls each job forward to now (a new leader catches up at once: the jobs
    are incremental and idempotent, so an extra run never repeats work)."""
    now = datetime.now(UTC)
    for spec in JOBS:
        seconds = int(getattr(settings, spec.interval_setting))
        trigger = trigger_for(spec, seconds)
        job = scheduler.get_job(spec.name)
        same = (
            job is not None
            and job.func_ref == "sidecar.scheduler:run_scheduled"
            and isinstance(job.trigger, IntervalTrigger)
            and job.trigger.interval == trigger.interval
            and (not spec.aligned or job.trigger.start_date == trigger.start_date)
        )
        if not same:
            # next_run_time=None would mean "paused" in APScheduler 3: pass it only to run now
            extra = {"next_run_time": now} if run_now else {}
            scheduler.add_job(
                "sidecar.scheduler:run_scheduled",
                trigger=trigger,
                args=[spec.name],
                id=spec.name,
                name=spec.name,
                replace_existing=True,
                **extra,
            )
        elif run_now:
            scheduler.modify_job(spec.name, next_run_time=now)
