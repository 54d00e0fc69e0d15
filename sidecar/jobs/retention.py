"""Retention job (daily): everything that holds prompts, responses or alert context expires
after Settings.retention_days.

- samples older than the cutoff (their embeddings and eval scores go with them, ON DELETE
  CASCADE);
- canary runs (and their probe results) started before now minus Settings.canary_retention_days,
  except the newest compared run, which the canary gauges read; then the retired canary
  baselines created before that cutoff that no remaining run references (never the active one);
- the frozen samples of baselines that were retired or rejected before the cutoff (an active,
  validated or candidate baseline keeps its copy: it may still be used);
- HTML drift reports in `report_dir` last written before the cutoff (the pages then say the run
  has no report);
- the writer's dead-letter files and corrupt-line copies in `journal_dir` last written before
  the cutoff (spill segments are never touched: they are pending data).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from storage.models import Baseline, BaselineSample
from storage.repositories._sql import affected_rows
from storage.repositories.canaries import (
    delete_canary_runs_older_than,
    delete_retired_canary_baselines_older_than,
)
from storage.repositories.samples import delete_samples_older_than
from vigil.config import Settings

SPENT_BASELINES = ("retired", "rejected")
REPORT_GLOB = "*.html"
JOURNAL_SIDE_FILES = ("dead-letter*.jsonl", "corrupt-*.txt")


@dataclass(frozen=True)
class RetentionResult:
    cutoff: datetime
    deleted: int  # samples
    baseline_samples: int = 0
    files: int = 0  # reports, dead-letter and corrupt-line files
    canary_runs: int = 0
    canary_baselines: int = 0


def _remove_older(directory: Path, patterns: tuple[str, ...], cutoff_ts: float) -> int:
    removed = 0
    if not directory.is_dir():
        return 0
    for pattern in patterns:
        for path in directory.glob(pattern):
            with contextlib.suppress(FileNotFoundError):
                if path.is_file() and path.stat().st_mtime < cutoff_ts:
                    path.unlink()
                    removed += 1
    return removed


def run_retention_job(
    settings: Settings, session_factory: sessionmaker[Session], now: datetime
) -> RetentionResult:
    cutoff = now - timedelta(days=settings.retention_days)
    with session_factory() as session:
        deleted = delete_samples_older_than(session, cutoff)
        spent = select(Baseline.id).where(
            Baseline.status.in_(SPENT_BASELINES), Baseline.created_at < cutoff
        )
        frozen = affected_rows(
            session, delete(BaselineSample).where(BaselineSample.baseline_id.in_(spent))
        )
        canary_cutoff = now - timedelta(days=settings.canary_retention_days)
        canary = delete_canary_runs_older_than(session, canary_cutoff)
        canary_baselines = delete_retired_canary_baselines_older_than(session, canary_cutoff)
        session.commit()
    files = _remove_older(Path(settings.report_dir), (REPORT_GLOB,), cutoff.timestamp())
    files += _remove_older(Path(settings.journal_dir), JOURNAL_SIDE_FILES, cutoff.timestamp())
    return RetentionResult(
        cutoff=cutoff,
        deleted=deleted,
        baseline_samples=int(frozen or 0),
        files=files,
        canary_runs=canary,
        canary_baselines=canary_baselines,
    )
