"""Sequential job: new samples' token statistics, in time order, through the online CUSUM.

Between hourly drift windows, `drift.streams.sequential.CusumDetector` watches (mean_logprob,
mean_entropy, completion_tokens) sample by sample. Its threshold is calibrated once per active
baseline (bootstrap on the baseline's frozen samples, Settings.sequential_arl0 samples between
false alarms) and its whole state lives in `job_cursors` under CURSOR, as JSON, with the
position reached (last timestamp and the ids seen at it). Each run reads the samples after that
position up to `now - GRACE_S` (late writes land first), feeds them, and in ONE transaction
moves the position and raises the `token_stats_cusum` condition alert on an alarm; after
`quiet_samples` samples without one, the open alert is resolved.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from alerts.service import raise_condition
from drift.streams.sequential import STREAMS, CusumDetector, calibrate
from sidecar.cursors import get_cursor, set_cursor
from sidecar.jobs.baselines import load_baseline_with_frame
from storage.repositories.baselines import get_active_baseline
from storage.repositories.samples import fetch_window
from storage.types import to_utc
from vigil.config import Settings

log = logging.getLogger("vigil.sidecar.sequential")

CURSOR = "sequential"
RULE = "token_stats_cusum"
GRACE_S = 60
MAX_ROWS = 50_000  # per run; the next run carries on from the position reached


@dataclass
class SequentialResult:
    baseline_id: int | None
    samples: int = 0
    alarms: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""


def quiet_samples(arl0: float) -> int:
    """Samples without an alarm after which the alert is resolved."""
    return max(100, int(arl0) // 10)


def stream_values(records: list[dict[str, Any]]) -> np.ndarray:
    """(n, 3) token statistics of records, NaN where a value is missing."""
    return np.array(
        [
            [float(r[name]) if r.get(name) is not None else np.nan for name in STREAMS]
            for r in records
        ],
        dtype=np.float64,
    ).reshape(len(records), len(STREAMS))


def _fresh_state(
    session: Session, settings: Settings, baseline_id: int, now: datetime
) -> dict[str, Any]:
    baseline, _ = load_baseline_with_frame(session, baseline_id)
    numeric = baseline.features.numeric
    values = np.column_stack([numeric.get(name, np.full(baseline.n, np.nan)) for name in STREAMS])
    detector = calibrate(
        values,
        arl0=settings.sequential_arl0,
        shift=settings.sequential_shift_sd,
        rng=np.random.default_rng([baseline_id, 7]),
    )
    log.info(
        "sequential detector calibrated on baseline %s: h=%.3f for ARL0=%d samples",
        baseline_id,
        detector.h,
        settings.sequential_arl0,
    )
    start = to_utc(now) - timedelta(seconds=GRACE_S + settings.sequential_interval_s)
    return {
        "baseline_id": baseline_id,
        "detector": detector.to_dict(),
        "timestamp": start.isoformat(),
        "ids": [],
    }


def run_sequential_job(
    settings: Settings, session_factory: sessionmaker[Session], now: datetime
) -> SequentialResult:
    with session_factory() as session:
        active = get_active_baseline(session)
        if active is None:
            return SequentialResult(None, note="no active baseline")
        raw = get_cursor(session, CURSOR)
        state = json.loads(raw) if raw else None
        if state is None or state.get("baseline_id") != active.id:
            try:
                state = _fresh_state(session, settings, active.id, now)
            except ValueError as exc:  # too few complete rows in the baseline
                return SequentialResult(active.id, note=str(exc))
        detector = CusumDetector.from_dict(state["detector"])
        since = datetime.fromisoformat(state["timestamp"])
        seen_at_since = set(state["ids"])
        records = fetch_window(
            session,
            since,
            to_utc(now) - timedelta(seconds=GRACE_S),
            limit=MAX_ROWS,
            with_eval_scores=False,
        )
        records = [
            r
            for r in records
            if not (
                r["id"] in seen_at_since
                and to_utc(datetime.fromisoformat(r["timestamp"].replace("Z", "+00:00")))
                == to_utc(since)
            )
        ]
        alarms = detector.update_many(stream_values(records)) if records else []
        result = SequentialResult(active.id, len(records))
        for alarm in alarms:
            rec = records[alarm.index]
            evidence = {
                "sample_id": rec["id"],
                "timestamp": rec["timestamp"],
                "stream": alarm.stream,
                "direction": alarm.direction,
                "statistic": alarm.statistic,
                "h": detector.h,
                "arl0": detector.arl0,
                "samples_seen": alarm.seen,
            }
            result.alarms.append(evidence)
        if alarms:
            last = result.alarms[-1]
            raise_condition(
                session,
                RULE,
                evidence=last,
                healthy=False,
                now=now,
                settings=settings,
                summary=f"token statistics shifted: CUSUM on {last['stream']} "
                f"({last['direction']}) passed h={detector.h:.2f} at sample "
                f"{last['sample_id']} [*]",
            )
        elif (
            detector.last_alarm_seen is not None
            and detector.seen - detector.last_alarm_seen >= quiet_samples(detector.arl0)
        ):
            raise_condition(session, RULE, healthy=True, now=now, settings=settings)
        if records:
            last_ts = records[-1]["timestamp"]
            new_since = to_utc(datetime.fromisoformat(last_ts.replace("Z", "+00:00")))
            ids = [r["id"] for r in records if r["timestamp"] == last_ts]
            state["ids"] = ids + (sorted(seen_at_since) if new_since == to_utc(since) else [])
            state["timestamp"] = new_since.isoformat()
        state["detector"] = detector.to_dict()
        set_cursor(session, CURSOR, json.dumps(state), now)
        session.commit()
        return result
