"""The sample record <-> database rows mapping, in one place.

A record is validated by the one schema, `vigil.sample_record` (what the engine logs, what
`POST /v1/ingest` accepts and what `vigil check` reads). `sample_from_record` turns a valid one
into a `ParsedSample` (the `samples` row plus its eval-score and embedding rows);
`record_from_row` turns a stored row back into a record.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from storage.models import Sample
from storage.types import to_utc, utcnow
from vigil.sample_record import (
    DEFAULT_MAX_FUTURE_SKEW_S,
    RecordError,
    SampleRecord,
    client_model_name,
    validate_record,
)

__all__ = ["RecordError", "ParsedSample", "sample_from_record", "record_from_row"]

# the record fields that are `samples` columns of the same name (besides id and timestamp)
ROW_FIELDS = (
    "tenant", "segment", "prompt_version", "model_version", "prompt", "response",
    "prompt_tokens", "completion_tokens", "finish_reason", "ttft_ms", "tpot_ms", "latency_ms",
    "queue_ms", "mean_logprob", "mean_entropy", "tools",
)  # fmt: skip
DEFAULT_EVAL_NAME = "default"  # the bare `eval_score` field


@dataclass
class ParsedSample:
    """One validated record: the `samples` row values plus the child rows it carries."""

    row: dict[str, Any]  # column -> value for `samples` (id, timestamp, ..., extra)
    eval_scores: dict[str, float] = field(default_factory=dict)  # name -> score
    embeddings: dict[str, np.ndarray] = field(default_factory=dict)  # prompt|response -> vec
    embedding_model: str = client_model_name(None)  # always a `client:` name

    @property
    def id(self) -> str:
        return self.row["id"]


def new_sample_id() -> str:
    return str(uuid.uuid4())


def format_timestamp(value: datetime) -> str:
    """RFC 3339 in UTC with a `Z`, e.g. 2026-11-29T11:00:00.250000Z."""
    return to_utc(value).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def vector_to_bytes(vector: Any) -> tuple[bytes, int]:
    """A 1-D vector -> (little-endian float32 bytes, dim). Raises RecordError if not 1-D/finite."""
    with np.errstate(over="ignore"):  # beyond float32 range becomes inf, refused below
        arr = np.asarray(vector, dtype="<f4")
    if arr.ndim != 1 or arr.size == 0:
        raise RecordError(f"embedding must be a non-empty 1-D vector, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise RecordError("embedding holds NaN or infinite values")
    return arr.tobytes(), int(arr.size)


def bytes_to_vector(data: bytes, dim: int) -> np.ndarray:
    """Stored float32 bytes -> a float32 numpy vector of length `dim` (checked)."""
    arr = np.frombuffer(data, dtype="<f4")
    if arr.size != dim:
        raise ValueError(f"stored embedding has {arr.size} values but dim says {dim}")
    return arr.astype(np.float32)


def sample_from_record(
    record: dict[str, Any] | SampleRecord,
    *,
    source: str = "engine",
    now: datetime | None = None,
    max_future_skew_s: float = DEFAULT_MAX_FUTURE_SKEW_S,
) -> ParsedSample:
    """Validate (`vigil.sample_record`) and normalise one record. Does not mutate `record`.

    A missing `id` becomes a new UUID4 and a missing `timestamp` `now` (default: the clock);
    `eval_score` becomes the eval score "default", `eval_<name>` the score `<name>`; vectors
    become float32 rows under the record's `client:` model name; other unknown fields go to
    `extra`. Raises RecordError naming the field at fault.
    """
    now = now or utcnow()
    valid = validate_record(record, now=now, max_future_skew_s=max_future_skew_s)
    row: dict[str, Any] = {name: getattr(valid, name) for name in ROW_FIELDS}
    row["id"] = valid.id or new_sample_id()
    row["timestamp"] = valid.timestamp_or(now)
    row["source"] = source
    row["sample_weight"] = valid.sample_weight
    row["extra"] = valid.unknown_fields or None
    return ParsedSample(
        row=row,
        eval_scores=valid.eval_scores,
        embeddings={f: np.asarray(v, dtype=np.float32) for f, v in valid.embeddings.items()},
        embedding_model=valid.stored_embedding_model,
    )


def record_from_row(
    sample: Sample | Any,
    eval_scores: dict[str, float] | None = None,
    embeddings: dict[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """A stored `samples` row (ORM object or Row with the same attributes) -> a record dict.

    The timestamp comes back as RFC 3339 (`...Z`); `extra` fields are merged back at the top
    level; eval scores as `eval_score` / `eval_<name>`; embeddings (if given) as float32 arrays
    under `prompt_embedding` / `response_embedding`. Fields that are NULL are left out.
    """
    record: dict[str, Any] = dict(sample.extra or {})
    record["id"] = sample.id
    record["timestamp"] = format_timestamp(sample.timestamp)
    for name in ROW_FIELDS:
        value = getattr(sample, name)
        if value is not None:
            record[name] = value
    record["sample_weight"] = sample.sample_weight
    for name, score in (eval_scores or {}).items():
        record["eval_score" if name == DEFAULT_EVAL_NAME else f"eval_{name}"] = score
    for fld, vec in (embeddings or {}).items():
        record[f"{fld}_embedding"] = vec
    return record
