"""The sample record <-> database rows mapping, in one place.

A record is the dict shape of DESIGN.md ("The sample record"): what the engine logs, what
`POST /v1/ingest` accepts and what `vigil check` reads. `sample_from_record` validates and
normalises one into a `ParsedSample` (the `samples` row plus its eval-score and embedding
rows); `record_from_row` turns a stored row back into a record.
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from storage.models import Sample
from storage.types import to_utc, utcnow

STRING_FIELDS = {  # field -> max length (the column's)
    "tenant": 128, "segment": 128, "prompt_version": 128, "model_version": 128,
    "finish_reason": 32, "prompt": None, "response": None,
}  # fmt: skip
INT_FIELDS = ("prompt_tokens", "completion_tokens")
FLOAT_FIELDS = ("ttft_ms", "tpot_ms", "latency_ms", "queue_ms", "mean_logprob", "mean_entropy")
EMBEDDING_FIELDS = {"prompt_embedding": "prompt", "response_embedding": "response"}
KNOWN_FIELDS = (
    {"id", "timestamp", "tools", "sample_weight", "embedding_model"}
    | set(STRING_FIELDS) | set(INT_FIELDS) | set(FLOAT_FIELDS) | set(EMBEDDING_FIELDS)
)  # fmt: skip
DEFAULT_EVAL_NAME = "default"  # the bare `eval_score` field
PROVIDED_EMBEDDING_MODEL = "provided"  # model name for embeddings that came inside a record
MAX_ID_LENGTH = 64


class RecordError(ValueError):
    """A record is malformed; the message names the field at fault."""


@dataclass
class ParsedSample:
    """One validated record: the `samples` row values plus the child rows it carries."""

    row: dict[str, Any]  # column -> value for `samples` (id, timestamp, ..., extra)
    eval_scores: dict[str, float] = field(default_factory=dict)  # name -> score
    embeddings: dict[str, np.ndarray] = field(default_factory=dict)  # prompt|response -> vec
    embedding_model: str = PROVIDED_EMBEDDING_MODEL

    @property
    def id(self) -> str:
        return self.row["id"]


def new_sample_id() -> str:
    return str(uuid.uuid4())


def parse_timestamp(value: Any, name: str = "timestamp") -> datetime:
    """Epoch seconds (int/float), an RFC 3339 string or a datetime -> aware UTC datetime."""
    if isinstance(value, datetime):
        return to_utc(value)
    if isinstance(value, bool):
        raise RecordError(f"{name}: expected epoch seconds or an RFC 3339 string, got a boolean")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise RecordError(f"{name}: {value!r} is not a finite epoch time")
        try:
            return datetime.fromtimestamp(float(value), tz=UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise RecordError(f"{name}: epoch {value!r} is out of range ({exc})") from None
    if isinstance(value, str):
        try:
            return to_utc(datetime.fromisoformat(value.strip()))
        except ValueError:
            raise RecordError(f"{name}: {value!r} is not an RFC 3339 timestamp") from None
    raise RecordError(f"{name}: expected epoch seconds or an RFC 3339 string, got {type(value).__name__}")


def format_timestamp(value: datetime) -> str:
    """RFC 3339 in UTC with a `Z`, e.g. 2026-11-29T11:00:00.250000Z."""
    return to_utc(value).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def vector_to_bytes(vector: Any) -> tuple[bytes, int]:
    """A 1-D vector -> (little-endian float32 bytes, dim). Raises RecordError if not 1-D/finite."""
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


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordError(f"{name}: expected a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise RecordError(f"{name}: {value!r} is not finite")
    return float(value)


def _integer(name: str, value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError(f"{name}: expected an integer, got {value!r}")
    if value < 0:
        raise RecordError(f"{name}: must be >= 0, got {value}")
    return value


def _string(name: str, value: Any, max_len: int | None) -> str:
    if not isinstance(value, str):
        raise RecordError(f"{name}: expected a string, got {type(value).__name__}")
    if max_len is not None and len(value) > max_len:
        raise RecordError(f"{name}: longer than {max_len} characters")
    return value


def sample_from_record(
    record: dict[str, Any], *, source: str = "engine", now: datetime | None = None
) -> ParsedSample:
    """Validate and normalise one record (see module doc). Does not mutate `record`.

    - `id`: kept (string, <= 64 chars); a new UUID4 when absent.
    - `timestamp`: epoch seconds or RFC 3339 (naive = UTC); `now` (default: the clock) when absent.
    - `eval_score` -> eval score named "default"; `eval_<name>` -> eval score `<name>`.
    - `prompt_embedding` / `response_embedding` -> float32 embedding rows, model name from the
      record's `embedding_model` (default "provided").
    - any other unknown field -> `extra` (must be JSON-serialisable).
    Needs `prompt` or `prompt_tokens`. Raises RecordError naming the field at fault.
    """
    if not isinstance(record, dict):
        raise RecordError(f"record: expected a JSON object, got {type(record).__name__}")
    if record.get("prompt") is None and record.get("prompt_tokens") is None:
        raise RecordError("record: needs `prompt` or `prompt_tokens`")
    sample_id = record.get("id")
    if sample_id is None:
        sample_id = new_sample_id()
    elif not isinstance(sample_id, str) or not sample_id or len(sample_id) > MAX_ID_LENGTH:
        raise RecordError(f"id: expected a non-empty string of at most {MAX_ID_LENGTH} characters")
    ts = record.get("timestamp")
    row: dict[str, Any] = {
        "id": sample_id,
        "timestamp": parse_timestamp(ts) if ts is not None else (now or utcnow()),
        "source": source,
    }
    for name, max_len in STRING_FIELDS.items():
        value = record.get(name)
        row[name] = None if value is None else _string(name, value, max_len)
    for name in INT_FIELDS:
        value = record.get(name)
        row[name] = None if value is None else _integer(name, value)
    for name in FLOAT_FIELDS:
        value = record.get(name)
        row[name] = None if value is None else _number(name, value)
    tools = record.get("tools")
    if tools is not None and (
        not isinstance(tools, list) or not all(isinstance(t, str) for t in tools)
    ):
        raise RecordError("tools: expected a list of strings")
    row["tools"] = tools
    weight = record.get("sample_weight")
    row["sample_weight"] = 1.0 if weight is None else _number("sample_weight", weight)
    if row["sample_weight"] <= 0:
        raise RecordError(f"sample_weight: must be > 0, got {row['sample_weight']}")

    parsed = ParsedSample(row=row)
    model = record.get("embedding_model")
    if model is not None:
        parsed.embedding_model = _string("embedding_model", model, 128)
    extra: dict[str, Any] = {}
    for name, value in record.items():
        if name in KNOWN_FIELDS or value is None:
            continue
        if name == "eval_score" or name.startswith("eval_"):
            score_name = DEFAULT_EVAL_NAME if name == "eval_score" else name[len("eval_"):]
            if not score_name or len(score_name) > 64:
                raise RecordError(f"{name}: evaluator name must be 1-64 characters")
            parsed.eval_scores[score_name] = _number(name, value)
        else:
            extra[name] = value
    for name, fld in EMBEDDING_FIELDS.items():
        value = record.get(name)
        if value is not None:
            try:
                vec = np.asarray(value, dtype="<f4")
                vector_to_bytes(vec)
            except (RecordError, ValueError, TypeError) as exc:
                raise RecordError(f"{name}: {exc}") from None
            parsed.embeddings[fld] = vec
    if extra:
        try:
            json.dumps(extra, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise RecordError(f"extra fields must be JSON values ({exc})") from None
    row["extra"] = extra or None
    return parsed


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
    for name in (*STRING_FIELDS, *INT_FIELDS, *FLOAT_FIELDS, "tools"):
        value = getattr(sample, name)
        if value is not None:
            record[name] = value
    record["sample_weight"] = sample.sample_weight
    for name, score in (eval_scores or {}).items():
        record["eval_score" if name == DEFAULT_EVAL_NAME else f"eval_{name}"] = score
    for fld, vec in (embeddings or {}).items():
        record[f"{fld}_embedding"] = vec
    return record
