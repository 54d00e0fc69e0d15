"""The sequential job: calibrates on the active baseline, feeds new samples once each, in time
order, raises `token_stats_cusum` on a shift and keeps its state in job_cursors."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
from sqlalchemy import select

from drift.baseline.build import build_baseline
from sidecar.cursors import get_cursor
from sidecar.jobs.sequential import CURSOR, RULE, run_sequential_job
from storage.db import session_factory
from storage.models import Alert
from storage.repositories.baselines import (
    add_baseline_samples,
    create_baseline,
    set_baseline_status,
)
from storage.repositories.samples import fetch_window, insert_samples

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def records(rng, n, start, prefix, logprob_shift=0.0):
    return [
        {
            "id": f"{prefix}{i}",
            "timestamp": (start + timedelta(seconds=i)).isoformat(),
            "prompt": "hi",
            "response": "hello",
            "mean_logprob": float(rng.normal(-0.6 + logprob_shift, 0.15)),
            "mean_entropy": float(rng.gamma(4.0, 0.3)),
            "completion_tokens": int(rng.poisson(80) + 1),
        }
        for i in range(n)
    ]


def test_shift_raises_the_condition_once_and_samples_are_fed_once(migrated_db, make_settings):
    settings = make_settings(migrated_db, sequential_arl0=200, sequential_interval_s=60)
    factory = session_factory(migrated_db)
    rng = np.random.default_rng(40)
    with factory() as s:
        insert_samples(s, records(rng, 600, T0 - timedelta(hours=2), "b"), now=T0)
        s.commit()
        frame = pd.DataFrame(fetch_window(s, T0 - timedelta(hours=3), T0))
        baseline = build_baseline(frame, seed=0, cluster=False)
        row = create_baseline(
            s,
            "b",
            T0 - timedelta(hours=3),
            T0,
            spec=baseline.to_dict(include_features=False),
            now=T0,
        )
        add_baseline_samples(
            s,
            row.id,
            [frame.iloc[int(i)].to_dict() for i in baseline.rows],
            max_samples=5000,
            embedding_model=None,
        )
        set_baseline_status(s, row.id, "validated", now=T0)
        set_baseline_status(s, row.id, "active", now=T0)
        s.commit()

    first = run_sequential_job(settings, factory, T0)  # calibrates; nothing new yet
    assert first.baseline_id == row.id and first.samples == 0
    start = T0 - timedelta(seconds=110)  # inside the first read-window (interval + grace)
    with factory() as s:
        insert_samples(s, records(rng, 400, start, "n", logprob_shift=-0.15), now=T0)
        s.commit()
    now = start + timedelta(seconds=400 + 61)
    second = run_sequential_job(settings, factory, now)
    assert second.samples == 400 and second.alarms
    assert second.alarms[0]["stream"] == "mean_logprob" and second.alarms[0]["direction"] == "down"
    again = run_sequential_job(settings, factory, now + timedelta(seconds=30))
    assert again.samples == 0  # the position moved: nothing is fed twice
    with factory() as s:
        alerts = s.scalars(select(Alert).where(Alert.rule == RULE)).all()
        assert len(alerts) == 1 and alerts[0].status == "open" and alerts[0].kind == "model"
        state = json.loads(get_cursor(s, CURSOR))
    assert state["baseline_id"] == row.id and state["detector"]["seen"] == 400
