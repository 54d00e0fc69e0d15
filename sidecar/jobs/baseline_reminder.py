"""Baseline refresh reminder: a `review` alert when the active baseline is older than
Settings.baseline_max_age_days (traffic moves on; a stale baseline makes every hour look drifted
or hides slow drift). Deduped by the alerts package: one open reminder, re-notified only after
its cooldown; it is resolved here once a newer baseline is active."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from alerts.dedupe import dedupe_key
from alerts.service import raise_alerts, resolve_alert
from storage.models import Alert
from storage.repositories.baselines import get_active_baseline
from vigil.config import Settings

RULE = "baseline_refresh"


@dataclass(frozen=True)
class ReminderResult:
    baseline_id: int | None
    age_days: float | None
    reminded: bool
    resolved: int


def run_baseline_reminder_job(
    settings: Settings, session_factory: sessionmaker[Session], now: datetime
) -> ReminderResult:
    with session_factory() as session:
        baseline = get_active_baseline(session)
        age = None
        if baseline is not None:
            since = baseline.activated_at or baseline.validated_at or baseline.created_at
            age = (now - since).total_seconds() / 86400
        if baseline is not None and age is not None and age > settings.baseline_max_age_days:
            proposal = {
                "severity": "review", "rule": RULE, "kind": "operational", "segment": "*",
                "summary": (
                    f"the active baseline #{baseline.id} ({baseline.name!r}) is {age:.0f} days old "
                    f"(limit {settings.baseline_max_age_days}): build, validate and activate a new "
                    "one with `vigil baseline build --from ... --to ...`"
                ),
                "evidence": {"baseline_id": baseline.id, "age_days": round(age, 2),
                             "max_age_days": settings.baseline_max_age_days},
            }  # fmt: skip
            raise_alerts(
                session, [proposal], run_id=None, now=now, settings=settings, resolve_absent=False
            )
            session.commit()
            return ReminderResult(baseline.id, age, True, 0)
        # fresh (or no) baseline: close a reminder left open for an older one
        stale = session.scalars(
            select(Alert).where(Alert.dedupe_key == dedupe_key(RULE, "*"), Alert.status == "open")
        ).all()
        for alert in stale:
            resolve_alert(session, alert.id, now=now, settings=settings)
        session.commit()
        return ReminderResult(baseline.id if baseline else None, age, False, len(stale))
