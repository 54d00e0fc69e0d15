"""Retention job (daily): delete samples older than Settings.retention_days.

Their embeddings and eval scores go with them (ON DELETE CASCADE); baselines keep their frozen
copies in `baseline_samples`, which does not reference `samples`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from storage.repositories.samples import delete_samples_older_than
from vigil.config import Settings


@dataclass(frozen=True)
class RetentionResult:
    cutoff: datetime
    deleted: int


def run_retention_job(
    settings: Settings, session_factory: sessionmaker[Session], now: datetime
) -> RetentionResult:
    cutoff = now - timedelta(days=settings.retention_days)
    with session_factory() as session:
        deleted = delete_samples_older_than(session, cutoff)
        session.commit()
    return RetentionResult(cutoff=cutoff, deleted=deleted)
