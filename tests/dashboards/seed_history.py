"""Seeds a database with a dashboard's worth of history (helper for tests/dashboards; no tests):
an active baseline, hourly drift runs with results, samples with latencies, eval scores, an
open alert. Bulk inserts, so 30 days of hourly runs take about a second."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

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
    session,
    *,
    hours: int = 48,
    samples_per_hour: int = 6,
    now: datetime | None = None,
    seed: int = 7,
) -> Seeded:
    rng = random.Random(seed)
    now = (now or datetime.now(UTC)).replace(minute=0, second=0, microsecond=0)
    start = now - timedelta(hours=hours)
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
    runs = [
        dict(
            baseline_id=baseline.id,
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
    alert = Alert(
        dedupe_key="psi|web",
        rule="prompt_psi",
        kind="prompt",
        severity="high",
        segment="web",
        status="open",
        summary="psi on prompt_tokens moved in web",
        run_id=run_ids[-1],
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
    session.add(alert)
    session.flush()
    session.commit()
    return Seeded(baseline.id, run_ids, alert.id, now, run_ids[-1])
