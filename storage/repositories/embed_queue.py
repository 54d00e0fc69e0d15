"""The embed job's queue for one drift window: the rows whose vectors the capped window's
embedding tests will read (`window_cap.window_selection` and its `nested_selection`, the
loader's own definitions) that have text but no vector by the sidecar's model yet."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, exists, func, or_, select
from sqlalchemy.orm import Session

from storage.models import Embedding, Sample
from storage.records import format_timestamp
from storage.repositories.samples import window_filter
from storage.repositories.window_cap import (
    DEFAULT_MIN_PER_STRATUM,
    Selection,
    nested_selection,
    window_selection,
)
from storage.types import to_utc


@dataclass(frozen=True)
class WindowQueue:
    """One window's read rows still without vectors."""

    selection: Selection
    terms: list[ColumnElement[bool]]

    @property
    def read_rows(self) -> int:
        return self.selection.rows


def window_queue(
    session: Session,
    start: datetime,
    end: datetime,
    *,
    max_rows: int,
    max_embedded_rows: int | None = None,
    min_per_segment: int = DEFAULT_MIN_PER_STRATUM,
) -> WindowQueue:
    """The rows of [start, end) that a drift read capped at `max_rows` keeps (so far, for a
    window still filling: a row kept then stays kept unless its segment's quota shrinks), or of
    those the nested subset under `max_embedded_rows` whose vectors the embedding tests read."""
    terms = window_filter(start, end)
    selection = window_selection(session, terms, max_rows, min_per_segment)
    if max_embedded_rows is not None:
        selection = nested_selection(session, terms, selection, max_embedded_rows, min_per_segment)
    return WindowQueue(selection, terms)


def _waiting(queue: WindowQueue, model: str) -> list[ColumnElement[bool]]:
    has_any = exists().where(Embedding.sample_id == Sample.id, Embedding.model == model)
    has_text = or_(Sample.prompt.is_not(None), Sample.response.is_not(None))
    return [*queue.terms, queue.selection.term, ~has_any, has_text]


def queued_samples(
    session: Session,
    queue: WindowQueue,
    model: str,
    limit: int,
    after: tuple[datetime, str] | None = None,
) -> list[dict[str, Any]]:
    """Up to `limit` read rows without a `model` vector, oldest first, as
    {id, timestamp, prompt, response} (the shape of `samples_missing_embeddings`) plus `key`,
    the row's (timestamp, id): pass the last one as `after` to go on past it without walking
    the window's done rows again (a window of a million rows reads a few in a thousand)."""
    query = (
        select(Sample.id, Sample.timestamp, Sample.prompt, Sample.response)
        .where(*_waiting(queue, model))
        .order_by(Sample.timestamp, Sample.id)
        .limit(limit)
    )
    if after is not None:
        ts, sample_id = after
        query = query.where(
            or_(Sample.timestamp > ts, and_(Sample.timestamp == ts, Sample.id > sample_id))
        )
    return [
        {"id": i, "timestamp": format_timestamp(ts), "prompt": p, "response": r, "key": (ts, i)}
        for i, ts, p, r in session.execute(query)
    ]


def queue_state(session: Session, queue: WindowQueue, model: str) -> tuple[int, datetime | None]:
    """(read rows still without a vector, when the oldest of them arrived)."""
    n, oldest = session.execute(
        select(func.count(), func.min(Sample.ingested_at)).where(*_waiting(queue, model))
    ).one()
    return int(n), None if oldest is None else to_utc(oldest)
