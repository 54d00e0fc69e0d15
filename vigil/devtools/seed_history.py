"""Seeds a database with a dashboard's worth of history (for the dashboards' tests and bench):
an active baseline, hourly drift runs with results, samples with latencies, eval scores, an
open alert. Bulk inserts, so 30 days of hourly runs take about a second. Rows the pages' tests
add to the last run: a result that moved, a spike from a tiny slice, a new tenant's alert."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert

from storage.models import Alert, Baseline, DriftResult, DriftRun, EvalScore, Sample

TESTS = (
    ("psi", "prompt_tokens", 0.2),
    ("ks", "latency_ms", 0.01),
    ("mmd", "prompt_embedding", 0.01),
)
SEGMENTS = ("*", "web", "api")


@dataclass
class Seeded:
    baseline_id: int
    run_ids: list[int]
    alert_id: int
    now: datetime
    drift_run_id: int  # the last run: psi drifted in segment "web"


def seed_history(
    session: Any,
    *,
    hours: int = 48,
    samples_per_hour: int = 6,
    now: datetime | None = None,
    seed: int = 7,
) -> Seeded:
    rng = random.Random(seed)
    now = (now or datetime.now(UTC)).replace(minute=0, second=0, microsecond=0)
    start = now - timedelta(hours=hours)
    baseline_id = _seed_baseline(session, start)
    run_ids = _seed_runs(session, rng, baseline_id, start, hours, samples_per_hour)
    _seed_samples(session, rng, start, hours, samples_per_hour)
    alert = _open_alert(run_ids[-1], now)
    session.add(alert)
    session.flush()
    session.commit()
    return Seeded(baseline_id, run_ids, alert.id, now, run_ids[-1])


def _seed_baseline(session: Any, start: datetime) -> int:
    """The active baseline, validated and activated before the history starts."""
    baseline = Baseline(
        name="b1",
        status="active",
        created_at=start - timedelta(days=1),
        window_start=start - timedelta(days=2),
        window_end=start - timedelta(days=1),
        activated_at=start - timedelta(hours=12),
        num_samples=500,
        spec={"thresholds": {"psi": {"*": 0.2}}},
        validation={"ok": True},
    )
    session.add(baseline)
    session.flush()
    return baseline.id


def _seed_runs(
    session: Any,
    rng: random.Random,
    baseline_id: int,
    start: datetime,
    hours: int,
    samples_per_hour: int,
) -> list[int]:
    """One finished drift run per hour with every test's results; the last run's psi drifted in
    segment "web". The run ids, oldest first."""
    runs = [
        dict(
            baseline_id=baseline_id,
            window_start=start + timedelta(hours=h),
            window_end=start + timedelta(hours=h + 1),
            started_at=start + timedelta(hours=h + 1),
            finished_at=start + timedelta(hours=h + 1),
            status="done",
            num_samples=samples_per_hour,
            summary={},
        )
        for h in range(hours)
    ]
    session.execute(insert(DriftRun), runs)
    run_ids = [r.id for r in session.query(DriftRun.id).order_by(DriftRun.window_end)]
    results = []
    for i, run_id in enumerate(run_ids):
        last = i == len(run_ids) - 1
        for test, feature, threshold in TESTS:
            for segment in SEGMENTS:
                drifted = last and test == "psi" and segment == "web"
                stat = 0.9 if drifted else rng.uniform(0.0, 0.1)
                p = 1e-6 if drifted else rng.uniform(0.05, 1.0)
                results.append(
                    dict(
                        run_id=run_id,
                        test=test,
                        feature=feature,
                        segment=segment,
                        statistic=stat,
                        p_value=None if test == "psi" else p,
                        threshold=threshold,
                        drifted=drifted,
                        insufficient=False,
                        detail={},
                    )
                )
    session.execute(insert(DriftResult), results)
    return run_ids


def _seed_samples(
    session: Any, rng: random.Random, start: datetime, hours: int, samples_per_hour: int
) -> None:
    """Samples with latencies spread over each hour, every second one with a judge score."""
    samples, scores = [], []
    for h in range(hours):
        for k in range(samples_per_hour):
            ts = start + timedelta(hours=h, minutes=rng.randrange(60))
            sid = f"s{h}-{k}"
            samples.append(
                dict(
                    id=sid,
                    timestamp=ts,
                    ingested_at=ts,
                    tenant="acme",
                    segment=rng.choice(SEGMENTS[1:]),
                    prompt=f"question {h} {k}",
                    response="answer",
                    ttft_ms=rng.uniform(20, 80),
                    tpot_ms=rng.uniform(5, 15),
                    latency_ms=rng.uniform(200, 900),
                    sample_weight=1.0,
                    source="ingest",
                )
            )
            if k % 2 == 0:
                scores.append(
                    dict(sample_id=sid, name="judge", score=rng.uniform(3, 5), created_at=ts)
                )
    session.execute(insert(Sample), samples)
    session.execute(insert(EvalScore), scores)


def _open_alert(run_id: int, now: datetime) -> Alert:
    """The open alert of the last run's drifted psi result."""
    return Alert(
        dedupe_key="psi|web",
        rule="prompt_psi",
        kind="prompt",
        severity="high",
        segment="web",
        status="open",
        summary="psi on prompt_tokens moved in web",
        run_id=run_id,
        evidence={
            "results": [
                {
                    "test": "psi",
                    "feature": "prompt_tokens",
                    "segment": "web",
                    "statistic": 0.9,
                    "threshold": 0.2,
                }
            ]
        },
        first_seen=now,
        last_seen=now,
    )


def moved_result(
    run_id: int,
    test: str,
    feature: str,
    segment: str,
    statistic: float,
    threshold: float,
    detail: dict,
) -> DriftResult:
    """A result of run `run_id` that moved (drifted, enough samples)."""
    return DriftResult(
        run_id=run_id, test=test, feature=feature, segment=segment, statistic=statistic,
        threshold=threshold, drifted=True, insufficient=False, detail=detail,
    )  # fmt: skip


def tiny_slice_spike(run_id: int) -> DriftResult:
    """The run's largest ratio (63.5x its threshold) from 8 live requests: under the floor, so
    it must never lead a page that no alert on it asked for."""
    return moved_result(run_id, "wasserstein", "tpot_ms", "*", 63.5, 1.0, {"n_current": 8})


# a new tenant, newco, is 65% of the last window; its alert is filed under all traffic (`*`)
NEW_TENANT: dict[str, Any] = {
    "test": "new_category",
    "feature": "tenant",
    "segment": "*",
    "statistic": 0.65,
    "threshold": 0.05,
    "drifted": True,
    "detail": {"new": [{"value": "newco", "share": 0.65, "count": 200, "big": True}]},
}


def new_tenant_result(data: Seeded) -> DriftResult:
    return moved_result(
        data.drift_run_id, "new_category", "tenant", "*", 0.65, 0.05, NEW_TENANT["detail"]
    )


def new_tenant_alert(data: Seeded) -> Alert:
    return Alert(
        dedupe_key="nc", rule="new_category", kind="prompt", severity="moderate", segment="*",
        status="open", summary="new tenant newco: 65% of the window", run_id=data.drift_run_id,
        evidence={"results": [NEW_TENANT]}, first_seen=data.now, last_seen=data.now,
    )  # fmt: skip
