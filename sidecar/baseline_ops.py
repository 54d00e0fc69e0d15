"""The baseline operations the dashboard's /baselines page offers, bound to this sidecar's
settings and database (the page lives in dashboards/, which does not import the sidecar)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from dashboards.baselines_page import BaselineOps
from vigil.config import Settings


def baseline_ops(settings: Settings, session_factory: sessionmaker[Session]) -> BaselineOps:
    from sidecar.jobs.baselines import (
        activate_baseline,
        build_baseline_from_window,
        validate_stored_baseline,
    )

    def build(start: datetime, end: datetime, now: datetime) -> int:
        return build_baseline_from_window(
            settings, session_factory, start, end, now=now
        ).baseline_id

    def validate(baseline_id: int, now: datetime) -> tuple[bool, list[str]]:
        result = validate_stored_baseline(settings, session_factory, baseline_id, now=now)
        return result.valid, list(result.reasons)

    def activate(baseline_id: int, now: datetime) -> None:
        activate_baseline(session_factory, baseline_id, now=now, settings=settings)

    return BaselineOps(build=build, validate=validate, activate=activate)
