"""The escalation job: re-sends and escalates incidents nobody acknowledged, per the rules
file's `escalation` section (alerts/escalation.py). A no-op without one."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from alerts.escalation import escalate_due
from vigil.config import Settings


def run_escalation_job(
    settings: Settings, session_factory: sessionmaker[Session], now: datetime
) -> int:
    with session_factory() as session, session.begin():
        return len(escalate_due(session, now=now, settings=settings))
