"""Baselines from stored traffic: build (candidate), validate (+ calibrate), activate, list.

A baseline's statistics (`drift.baseline.build.Baseline.to_dict(include_features=False)`) live in
`baselines.spec`; the samples it was built from are frozen, in the baseline's own row order, in
`baseline_samples` (with their embeddings), so the baseline outlives sample retention and
`Baseline.from_dict(spec, frozen_frame)` restores it exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import pandas as pd
from sqlalchemy.orm import Session, sessionmaker

from sidecar.jobs.embed import model_name, run_embed_job
from storage.repositories.baselines import (
    BaselineError,
    add_baseline_samples,
    create_baseline,
    get_baseline,
    load_baseline_samples,
    set_baseline_status,
    update_baseline,
)
from storage.repositories.samples import fetch_window
from storage.types import to_utc
from vigil.config import Settings

if TYPE_CHECKING:
    from drift.baseline.build import Baseline

MAX_FROZEN = 5000  # the bounded frozen copy (and the statistics' sample) per baseline
MIN_SAMPLES = 100  # validation needs two halves of >= 50


@dataclass(frozen=True)
class BuildResult:
    baseline_id: int
    num_samples: int
    num_source: int


@dataclass(frozen=True)
class ValidateResult:
    baseline_id: int
    valid: bool
    reasons: list[str]
    window_size: int


def build_baseline_from_window(
    settings: Settings,
    session_factory: sessionmaker[Session],
    start: datetime,
    end: datetime,
    *,
    name: str | None = None,
    now: datetime,
    seed: int = 0,
) -> BuildResult:
    """A `candidate` baseline from the samples in [start, end), read as a drift window is (at
    most Settings.drift_max_window_rows rows, stratified by segment, weights rescaled): embeds
    every read row that has no vectors yet (a one-off cost; a window's embedding tests read a
    smaller subset, Settings.drift_max_embedded_rows), freezes a seeded sample of at most
    MAX_FROZEN records and the statistics over them."""
    from drift.baseline.build import build_baseline

    start, end = to_utc(start), to_utc(end)
    if end <= start:
        raise BaselineError("--to must be after --from")
    while True:  # the baseline needs every read row's vectors; each run embeds a bounded share
        done = run_embed_job(
            settings, session_factory, now, windows=[(start, end)], unread=False,
            max_embedded_rows=settings.drift_max_window_rows,
        )  # fmt: skip
        if done.waiting == 0 or done.samples == 0:
            break
    model = model_name(settings)
    with session_factory() as session:
        records = fetch_window(
            session,
            start,
            end,
            embedding_model=model,
            max_rows=settings.drift_max_window_rows,
            min_per_segment=settings.drift_min_rows_per_segment,
        )
        if len(records) < MIN_SAMPLES:
            raise BaselineError(
                f"only {len(records)} samples between {start:%Y-%m-%d %H:%M} and "
                f"{end:%Y-%m-%d %H:%M} "
                f"UTC; a baseline needs at least {MIN_SAMPLES}"
            )
        baseline = build_baseline(pd.DataFrame(records), max_samples=MAX_FROZEN, seed=seed)
        label = name or f"traffic {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M}"
        row = create_baseline(
            session, label, start, end, spec=baseline.to_dict(include_features=False), now=now
        )
        if baseline.rows is None:  # build_baseline records the source row of each frozen one
            raise BaselineError("the built baseline names no source rows")
        frozen = [records[int(i)] for i in baseline.rows]
        added = add_baseline_samples(
            session, row.id, frozen, max_samples=MAX_FROZEN, embedding_model=model
        )
        session.commit()
        return BuildResult(row.id, added, len(records))


def load_baseline_with_frame(session: Session, baseline_id: int) -> tuple[Baseline, pd.DataFrame]:
    """(drift Baseline, frozen records as a frame) of stored baseline `baseline_id`."""
    from drift.baseline.build import Baseline

    row = get_baseline(session, baseline_id)
    if row is None:
        raise BaselineError(f"no baseline with id {baseline_id}")
    if not row.spec:
        raise BaselineError(f"baseline {baseline_id} holds no statistics (spec is empty)")
    frame = pd.DataFrame(load_baseline_samples(session, baseline_id, with_embeddings=True))
    return Baseline.from_dict(row.spec, features=frame), frame


def load_baseline(session: Session, baseline_id: int) -> Baseline:
    """The drift Baseline of stored baseline `baseline_id` (statistics + frozen samples)."""
    return load_baseline_with_frame(session, baseline_id)[0]


def window_size_for(settings: Settings, num_samples: int, start: datetime, end: datetime) -> int:
    """Samples one drift window is expected to hold, from the baseline's own traffic rate."""
    hours = max((to_utc(end) - to_utc(start)).total_seconds() / 3600, 1e-9)
    per_window = num_samples / hours * settings.drift_interval_s / 3600
    return max(int(round(per_window)), 1)


def validate_stored_baseline(
    settings: Settings, session_factory: sessionmaker[Session], baseline_id: int, *, now: datetime
) -> ValidateResult:
    """Halves must not drift (else `rejected`, with reasons); a valid one is calibrated from its
    own window-to-window noise, gets the smallest effect each test detects at the window size
    (drift.baseline.power), and becomes `validated`."""
    from drift.baseline.calibrate import calibrate_baseline
    from drift.baseline.power import detectable_effects
    from drift.baseline.validate import validate_baseline

    with session_factory() as session:
        row = get_baseline(session, baseline_id)
        if row is None:
            raise BaselineError(f"no baseline with id {baseline_id}")
        if row.status != "candidate":
            raise BaselineError(
                f"baseline {baseline_id} is {row.status}; only a candidate is validated"
            )
        baseline = load_baseline(session, baseline_id)
        result = validate_baseline(baseline)
        size = window_size_for(settings, row.num_samples, row.window_start, row.window_end)
        if result.valid:
            calibrate_baseline(baseline, window_size=size)
            if settings.baseline_power:
                baseline.power = detectable_effects(baseline, window_size=size).to_dict()
        update_baseline(session, baseline_id, spec=baseline.to_dict(include_features=False))
        status = "validated" if result.valid else "rejected"
        set_baseline_status(session, baseline_id, status, validation=result.to_dict(), now=now)
        session.commit()
        return ValidateResult(baseline_id, result.valid, list(result.reasons), size)


def activate_baseline(
    session_factory: sessionmaker[Session],
    baseline_id: int,
    *,
    now: datetime,
    settings: Settings | None = None,
) -> None:
    """validated -> active; the previously active baseline becomes retired (one transaction).
    With `settings`, the monitor's baseline alerts resolve in that same transaction: drift is
    measured again from this moment, not from the next hourly window."""
    with session_factory() as session:
        row = get_baseline(session, baseline_id)
        if row is None:
            raise BaselineError(f"no baseline with id {baseline_id}")
        if row.status != "validated":
            raise BaselineError(
                f"baseline {baseline_id} is {row.status}: only a validated baseline can be "
                f"activated (run `vigil baseline validate --id {baseline_id}` first)"
            )
        set_baseline_status(session, baseline_id, "active", now=now)
        if settings is not None:
            from alerts.service import raise_condition
            from sidecar.jobs.drift_health import BASELINE_INVALID, NO_BASELINE

            for rule in (NO_BASELINE, BASELINE_INVALID):
                raise_condition(session, rule, healthy=True, now=now, settings=settings)
        session.commit()
