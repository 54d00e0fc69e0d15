"""A row cap for eval-score reads that keeps the eval trend's statistics honest.

The eval trend (drift.detectors.eval_trend) compares the trailing mean of each score with the
baseline's by Welch's t-test and Mann-Whitney's U, and lists daily means. Those need individual
scores: per-hour aggregates would keep means and variances but not the ranks Mann-Whitney uses. So
the read is capped by sampling instead: every n/q-th scored sample in time order (done in SQL with
row_number(); exactly q of n, deterministic). Every sample has the same chance q/n, so the
sampled mean estimates the full mean without reweighting, and the time order spreads the kept
samples evenly over the days, so each day keeps its share of the trend. A segment keeps its
share of the cap too (no floor: a floor would over-weight minorities in the whole-window mean).
All scores of a kept sample are read, so the per-sample rows stay whole.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, Select, exists, func, select

from storage.models import EvalScore, Sample


def scored_sample_ids(
    terms: list[ColumnElement[bool]], max_samples: int, name: str | None = None
) -> Select:
    """Ids of at most `max_samples` samples matching `terms` that hold a score (by evaluator
    `name` if given): all of them when they fit, else a systematic sample in time order."""
    if max_samples < 1:
        raise ValueError(f"max_samples must be positive, got {max_samples}")
    scored = exists().where(EvalScore.sample_id == Sample.id)
    if name is not None:
        scored = scored.where(EvalScore.name == name)
    rn = func.row_number().over(order_by=(Sample.timestamp, Sample.id)).label("rn")
    total = func.count().over().label("total")
    sub = select(Sample.id, rn, total).where(*terms, scored).subquery()
    # keep row rn when floor(rn*q/n) steps up: every row when n <= q, else exactly q rows
    step = (sub.c.rn * max_samples) // sub.c.total > ((sub.c.rn - 1) * max_samples) // sub.c.total
    return select(sub.c.id).where(step)
