"""In-process record of scheduled job runs (count, failures, durations) for /metrics.

Jobs run only on the leader, so these numbers are per replica: sum them over replicas (or read
the leader's) in PromQL. Reset on restart, as any Prometheus counter may be.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass
class JobTally:
    runs: int = 0
    failures: int = 0
    seconds_total: float = 0.0
    last_seconds: float = 0.0
    last_success_unix: float = 0.0


_lock = threading.Lock()
_tallies: dict[str, JobTally] = {}


def record_run(job: str, *, ok: bool, seconds: float, finished_unix: float) -> None:
    with _lock:
        tally = _tallies.setdefault(job, JobTally())
        tally.runs += 1
        tally.seconds_total += max(0.0, seconds)
        tally.last_seconds = max(0.0, seconds)
        if ok:
            tally.last_success_unix = finished_unix
        else:
            tally.failures += 1


def snapshot() -> dict[str, JobTally]:
    with _lock:
        return {name: JobTally(**vars(t)) for name, t in _tallies.items()}


def reset() -> None:
    """For tests."""
    with _lock:
        _tallies.clear()
