"""Evaluator scores: one row per (sample, evaluator name); higher is better."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import exists, func, select
from sqlalchemy.orm import Session

from storage.models import EvalScore, Sample
from storage.repositories._sql import insert_ignore, opt_float, to_jsonable
from storage.repositories.eval_sample import scored_sample_ids
from storage.repositories.samples import samples_lacking, window_filter
from storage.types import utcnow


@dataclass
class EvalScoreRow:
    """A score to store: evaluator `name` (e.g. judge, relevancy, refusal) on one sample."""

    sample_id: str
    name: str
    score: float
    detail: dict[str, Any] | None = None


@dataclass
class WindowEvalScore:
    """A stored score with the sample's time and segment keys (for trends per segment)."""

    sample_id: str
    name: str
    score: float
    timestamp: datetime
    segment: str | None
    tenant: str | None


def store_eval_scores(
    session: Session, rows: Iterable[EvalScoreRow], *, now: datetime | None = None
) -> int:
    """Store scores; idempotent on (sample_id, name): a sample scored twice by one evaluator
    keeps the first score. Returns how many rows were new. Raises ValueError on a NaN score.
    Does not commit."""
    created = now or utcnow()
    values = []
    for row in rows:
        score = opt_float(row.score)
        if score is None:
            raise ValueError(f"eval score {row.name!r} for {row.sample_id}: not a finite number")
        values.append(
            {"sample_id": row.sample_id, "name": row.name, "score": score,
             "created_at": created, "detail": to_jsonable(row.detail)}
        )  # fmt: skip
    table = EvalScore.__table__
    return len(insert_ignore(session, table, values, ["sample_id", "name"], table.c.id))


def load_eval_scores(
    session: Session,
    start: datetime,
    end: datetime,
    *,
    name: str | None = None,
    segment: str | None = None,
    tenant: str | None = None,
    max_samples: int | None = None,
) -> list[WindowEvalScore]:
    """Scores of samples with start <= timestamp < end (optionally one evaluator / segment),
    ordered by sample time. `max_samples`: with more scored samples than that, the scores of
    a systematic sample of them in time order (storage.repositories.eval_sample)."""
    terms = window_filter(start, end, segment=segment, tenant=tenant)
    query = (
        select(EvalScore.sample_id, EvalScore.name, EvalScore.score,
               Sample.timestamp, Sample.segment, Sample.tenant)
        .join(Sample, Sample.id == EvalScore.sample_id)
        .where(*terms)
        .order_by(Sample.timestamp, Sample.id, EvalScore.name)
    )  # fmt: skip
    if name is not None:
        query = query.where(EvalScore.name == name)
    if max_samples is not None:
        query = query.where(EvalScore.sample_id.in_(scored_sample_ids(terms, max_samples, name)))
    return [WindowEvalScore(*row) for row in session.execute(query)]


def samples_missing_eval_scores(
    session: Session, name: str, limit: int = 256, *, since: datetime | None = None
) -> list[dict[str, Any]]:
    """Samples with a prompt and no score by evaluator `name`, oldest first (timestamp >=
    `since` if given), as dicts {id, timestamp (RFC 3339), prompt, response}."""
    scored = exists().where(EvalScore.sample_id == Sample.id, EvalScore.name == name)
    return samples_lacking(session, ~scored, Sample.prompt.is_not(None), limit=limit, since=since)


def count_eval_scores(session: Session, name: str | None = None) -> int:
    """How many eval score rows (of evaluator `name`, or all)."""
    query = select(func.count()).select_from(EvalScore)
    if name is not None:
        query = query.where(EvalScore.name == name)
    return int(session.scalar(query) or 0)
