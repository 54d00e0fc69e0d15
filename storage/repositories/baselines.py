"""Baselines: candidate -> validated -> active -> retired (or rejected), with a bounded frozen
copy of their samples in `baseline_samples` that survives sample retention."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from storage.models import Baseline, BaselineSample, Sample
from storage.records import vector_to_bytes
from storage.repositories._sql import chunked, to_jsonable
from storage.repositories.embeddings import load_embeddings
from storage.repositories.samples import get_samples, window_filter
from storage.types import to_utc, utcnow

STATUSES = ("candidate", "validated", "rejected", "active", "retired")
TRANSITIONS = {
    "candidate": {"validated", "rejected"},
    "validated": {"active", "rejected", "retired"},
    "active": {"retired"},
    "rejected": set(),
    "retired": set(),
}
DEFAULT_MAX_FROZEN = 5000


class BaselineError(ValueError):
    """A baseline operation is not allowed (unknown id, illegal status change, ...)."""


def create_baseline(
    session: Session,
    name: str,
    window_start: datetime,
    window_end: datetime,
    *,
    spec: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> Baseline:
    """A new `candidate` baseline over [window_start, window_end). Flushes (id is set)."""
    if to_utc(window_end) <= to_utc(window_start):
        raise BaselineError("baseline window_end must be after window_start")
    baseline = Baseline(
        name=name, status="candidate", created_at=now or utcnow(),
        window_start=to_utc(window_start), window_end=to_utc(window_end),
        num_samples=0, spec=to_jsonable(spec),
    )  # fmt: skip
    session.add(baseline)
    session.flush()
    return baseline


def get_baseline(session: Session, baseline_id: int) -> Baseline | None:
    return session.get(Baseline, baseline_id)


def list_baselines(session: Session, status: str | None = None) -> list[Baseline]:
    """Baselines, newest first (optionally of one status)."""
    query = select(Baseline).order_by(Baseline.id.desc())
    if status is not None:
        query = query.where(Baseline.status == status)
    return list(session.scalars(query))


def get_active_baseline(session: Session) -> Baseline | None:
    """The one `active` baseline, or None."""
    return session.scalars(select(Baseline).where(Baseline.status == "active")).first()


def _require(session: Session, baseline_id: int) -> Baseline:
    baseline = session.get(Baseline, baseline_id)
    if baseline is None:
        raise BaselineError(f"no baseline with id {baseline_id}")
    return baseline


def set_baseline_status(
    session: Session,
    baseline_id: int,
    status: str,
    *,
    validation: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> Baseline:
    """Move a baseline along candidate -> validated|rejected, validated -> active|rejected|retired,
    active -> retired. Activating retires the previously active one (at most one active).
    `validation` (reasons, metrics) is stored when given. Raises BaselineError otherwise."""
    if status not in STATUSES:
        raise BaselineError(f"unknown baseline status {status!r}; one of {STATUSES}")
    baseline = _require(session, baseline_id)
    if status not in TRANSITIONS[baseline.status]:
        raise BaselineError(f"baseline {baseline_id} is {baseline.status}; cannot become {status}")
    when = now or utcnow()
    if status == "active":
        session.execute(
            update(Baseline)
            .where(Baseline.status == "active", Baseline.id != baseline_id)
            .values(status="retired")
        )
        baseline.activated_at = when
    if status == "validated":
        baseline.validated_at = when
    if validation is not None:
        baseline.validation = to_jsonable(validation)
    baseline.status = status
    session.flush()
    return baseline


def update_baseline(
    session: Session,
    baseline_id: int,
    *,
    spec: dict[str, Any] | None = None,
    validation: dict[str, Any] | None = None,
    cluster_model: bytes | None = None,
) -> Baseline:
    """Set the frozen spec (PSI bin edges, calibrated thresholds), validation report or
    serialised cluster model of a baseline (only the arguments given)."""
    baseline = _require(session, baseline_id)
    if spec is not None:
        baseline.spec = to_jsonable(spec)
    if validation is not None:
        baseline.validation = to_jsonable(validation)
    if cluster_model is not None:
        baseline.cluster_model = cluster_model
    session.flush()
    return baseline


def _frozen_row(baseline_id: int, record: dict[str, Any], model: str | None) -> dict[str, Any]:
    record = dict(record)
    vectors = {}
    for fld in ("prompt", "response"):
        vec = record.pop(f"{fld}_embedding", None)
        vectors[fld] = None if vec is None else vector_to_bytes(vec)[0]
    if model is not None:
        record["embedding_model"] = model
    return {
        "baseline_id": baseline_id, "sample_id": str(record.get("id")),
        "record": to_jsonable(record),
        "prompt_embedding": vectors["prompt"], "response_embedding": vectors["response"],
    }  # fmt: skip


def add_baseline_samples(
    session: Session,
    baseline_id: int,
    records: Iterable[dict[str, Any]],
    *,
    max_samples: int = DEFAULT_MAX_FROZEN,
    embedding_model: str | None = None,
) -> int:
    """Freeze explicit records (dicts, optionally with prompt/response embeddings) into the
    baseline, up to `max_samples` frozen in total; returns how many were added."""
    baseline = _require(session, baseline_id)
    room = max_samples - baseline.num_samples
    rows: list[dict[str, Any]] = []
    for record in records:
        if len(rows) >= room:
            break
        rows.append(_frozen_row(baseline_id, record, embedding_model))
    if rows:
        session.execute(BaselineSample.__table__.insert(), rows)
    baseline.num_samples += len(rows)
    session.flush()
    return len(rows)


def freeze_baseline_samples(
    session: Session,
    baseline_id: int,
    *,
    max_samples: int = DEFAULT_MAX_FROZEN,
    embedding_model: str | None = None,
    segment: str | None = None,
    seed: int = 0,
) -> int:
    """Copy the samples of the baseline's window (a seeded uniform subset when there are more
    than `max_samples`) into `baseline_samples`, with their eval scores and, when
    `embedding_model` is given, their prompt/response vectors. Returns how many were frozen."""
    baseline = _require(session, baseline_id)
    terms = window_filter(baseline.window_start, baseline.window_end, segment=segment)
    ids = list(
        session.scalars(select(Sample.id).where(*terms).order_by(Sample.timestamp, Sample.id))
    )
    room = max(max_samples - baseline.num_samples, 0)
    if len(ids) > room:
        keep = np.sort(np.random.default_rng(seed).choice(len(ids), size=room, replace=False))
        ids = [ids[i] for i in keep]
    added = 0
    for chunk in chunked(ids):
        records = get_samples(session, chunk)
        if embedding_model is not None:
            for fld in ("prompt", "response"):
                found, matrix = load_embeddings(session, chunk, embedding_model, fld)
                vectors = dict(zip(found, matrix, strict=True))
                for record in records:
                    if record["id"] in vectors:
                        record[f"{fld}_embedding"] = vectors[record["id"]]
        added += add_baseline_samples(
            session, baseline_id, records, max_samples=max_samples, embedding_model=embedding_model
        )
    return added


def load_baseline_samples(
    session: Session, baseline_id: int, *, with_embeddings: bool = False
) -> list[dict[str, Any]]:
    """The frozen records of a baseline (in freezing order); with float32 vectors under
    prompt_embedding/response_embedding when `with_embeddings`."""
    query = select(BaselineSample).where(BaselineSample.baseline_id == baseline_id)
    out = []
    for row in session.scalars(query.order_by(BaselineSample.id)):
        record = dict(row.record)
        if with_embeddings:
            for fld in ("prompt", "response"):
                data = getattr(row, f"{fld}_embedding")
                if data is not None:
                    record[f"{fld}_embedding"] = np.frombuffer(data, dtype="<f4").astype(np.float32)
        out.append(record)
    return out


def load_baseline_embeddings(
    session: Session, baseline_id: int, field: str = "prompt"
) -> tuple[list[str], np.ndarray]:
    """(sample ids, float32 matrix) of a baseline's frozen `field` vectors."""
    column = getattr(BaselineSample, f"{field}_embedding")
    query = (
        select(BaselineSample.sample_id, column)
        .where(BaselineSample.baseline_id == baseline_id, column.is_not(None))
        .order_by(BaselineSample.id)
    )
    pairs = [
        (i, np.frombuffer(d, dtype="<f4").astype(np.float32)) for i, d in session.execute(query)
    ]
    if not pairs:
        return [], np.zeros((0, 0), dtype=np.float32)
    return [i for i, _ in pairs], np.stack([v for _, v in pairs])


def count_baseline_samples(session: Session, baseline_id: int) -> int:
    query = select(func.count()).where(BaselineSample.baseline_id == baseline_id)
    return int(session.scalar(query) or 0)
