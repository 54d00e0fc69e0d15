"""Set up a database the way a running system would have it before a drift window: traffic
written through storage, embedded and evaluated by the sidecar's jobs, a baseline built,
validated and activated through the same functions `vigil baseline` calls."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from traffic_gen import traffic

from sidecar.evals.judge import Judge
from sidecar.jobs.baselines import (
    activate_baseline,
    build_baseline_from_window,
    validate_stored_baseline,
)
from sidecar.jobs.embed import run_embed_job
from sidecar.jobs.evaluate import SETTLE_S, run_evaluate_job
from storage.repositories.samples import insert_samples

HOUR = timedelta(hours=1)


def last_window(interval_s: int = 3600) -> tuple[datetime, datetime]:
    now = datetime.now(UTC).timestamp()
    end = datetime.fromtimestamp(now - now % interval_s, UTC)
    return end - timedelta(seconds=interval_s), end


@dataclass
class World:
    window: tuple[datetime, datetime]
    baseline_id: int
    baseline_records: list[dict]
    drift_records: list[dict]
    judged: int


def clear_of_window_boundary(interval_s: int, margin_s: float = 240.0) -> None:
    """Sleep past the next window boundary when it is close: a sidecar started after it claims
    the next window (empty) instead of the one the test filled (a flake near the hour in CI)."""
    margin_s = min(margin_s, interval_s / 4)
    left = interval_s - time.time() % interval_s
    if left < margin_s:
        time.sleep(left + 1.0)


def prepare(
    settings, factory, judge_url: str | None, *, n_baseline=240, n_drift=120, seed=7
) -> World:
    """`judge_url=None` skips the evaluate job (no eval scores)."""
    clear_of_window_boundary(settings.drift_interval_s)
    start, end = last_window(settings.drift_interval_s)
    base_start, base_end = start - 4 * HOUR, start - HOUR
    baseline_records = traffic(base_start, base_end, n_baseline, seed=seed)
    drift_records = traffic(start, end, n_drift, seed=seed + 1, new_topic_share=0.35)
    with factory() as session:
        insert_samples(session, baseline_records + drift_records)
        session.commit()
    now = datetime.now(UTC)
    run_embed_job(settings, factory, now)
    judged = 0
    if judge_url is not None:
        judge = Judge(judge_url, "judge-model")
        try:
            while True:  # the job judges at most MAX_JUDGED_PER_RUN per run
                later = now + timedelta(seconds=SETTLE_S + 1)
                result = run_evaluate_job(settings, factory, later, judge=judge)
                judged += result.judged
                if result.scanned == 0:
                    break
        finally:
            judge.close()
    built = build_baseline_from_window(
        settings, factory, base_start, base_end, name="test", now=now
    )
    checked = validate_stored_baseline(settings, factory, built.baseline_id, now=now)
    assert checked.valid, checked.reasons
    activate_baseline(factory, built.baseline_id, now=now, settings=settings)
    return World((start, end), built.baseline_id, baseline_records, drift_records, judged)
