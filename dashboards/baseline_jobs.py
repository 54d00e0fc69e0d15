"""Baseline work started from the /baselines page (building a baseline from a window, validating
one) runs as a background job: it reads a window of samples, embeds and calibrates, which takes
seconds to minutes, and run on the request's event loop it would stall every other request the
sidecar serves (`/health` included) for as long.

One worker thread per sidecar process runs the jobs one at a time, in the order they were
asked for; the page lists the latest `KEPT` with their state (queued, running, done, failed)
and outcome. The list lives in the process that took the request.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger("vigil.dashboards")

KEPT = 20


@dataclass
class BaselineJob:
    id: int
    what: str  # "build baseline from ... to ...", "validate baseline 7"
    state: str = "queued"  # queued, running, done, failed
    asked_at: datetime | None = None
    finished_at: datetime | None = None
    outcome: str = ""  # what it did, or why it failed


class BaselineJobs:
    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._jobs: deque[BaselineJob] = deque(maxlen=KEPT)
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vigil-baseline-job")
        self._futures: dict[int, Future[Any]] = {}

    def submit(self, what: str, work: Callable[[], str]) -> BaselineJob:
        """Queue `work` (returns the outcome in words; a ValueError or LookupError is a refusal
        shown as the outcome) and return its job at once."""
        job = BaselineJob(next(self._ids), what, asked_at=datetime.now(UTC))
        with self._lock:
            self._jobs.appendleft(job)
            self._futures = {k: f for k, f in self._futures.items() if not f.done()}
            self._futures[job.id] = self._pool.submit(self._run, job, work)
        return job

    def _run(self, job: BaselineJob, work: Callable[[], str]) -> None:
        job.state = "running"
        try:
            job.outcome, job.state = work(), "done"
        except (ValueError, LookupError) as exc:  # a refusal (BaselineError is a ValueError)
            job.outcome, job.state = f"refused: {exc}", "failed"
        except Exception as exc:
            log.exception("baseline job %d (%s) failed", job.id, job.what)
            job.outcome, job.state = f"failed: {type(exc).__name__}", "failed"
        finally:
            job.finished_at = datetime.now(UTC)

    def latest(self) -> list[BaselineJob]:
        with self._lock:
            return list(self._jobs)

    def wait(self, job_id: int, timeout: float | None = None) -> BaselineJob | None:
        """Block until job `job_id` has finished (for callers that must know, and tests)."""
        with self._lock:
            future = self._futures.get(job_id)
        if future is not None:
            future.result(timeout)
        return next((j for j in self.latest() if j.id == job_id), None)
