"""The sample record as `POST /v1/ingest` accepts it (DESIGN.md, "The sample record").

Known fields are typed and range-checked; unknown fields are kept (they land in `extra`);
`eval_<name>` fields must be numbers. A record needs `prompt` or `prompt_tokens`.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

Text = Annotated[str, Field(max_length=1_000_000)]
Key = Annotated[str, Field(min_length=1, max_length=128)]
Ms = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0, le=10_000_000)]
Vector = Annotated[list[Annotated[float, Field(allow_inf_nan=False)]], Field(min_length=1, max_length=8192)]

# RFC 3339 strings or epoch seconds; epoch values outside [1970, 2200) are refused
_MAX_EPOCH = 7_258_118_400.0


def _parse_timestamp(value: Any) -> datetime:
    """Epoch seconds or RFC 3339 (with a zone) -> aware UTC datetime; one clear error otherwise."""
    if isinstance(value, bool):
        raise ValueError("expected epoch seconds or an RFC 3339 string, got a boolean")
    if isinstance(value, int | float):
        if not (math.isfinite(value) and 0 <= value < _MAX_EPOCH):
            raise ValueError("epoch seconds must be between 0 and 7258118400 (years 1970-2199)")
        return datetime.fromtimestamp(float(value), UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"{value[:40]!r} is not an RFC 3339 timestamp") from None
        if parsed.tzinfo is None:
            raise ValueError("an RFC 3339 timestamp needs a zone offset (e.g. 'Z' or '+00:00')")
        return parsed.astimezone(UTC)
    if isinstance(value, datetime):
        return value
    raise ValueError(f"expected epoch seconds or an RFC 3339 string, got {type(value).__name__}")


def _unstorable_text(value: Any, path: str) -> str | None:
    """The first string (at `path`) that no database can store: NUL characters (PostgreSQL
    text) or lone UTF-16 surrogates (not encodable as UTF-8, which JSON's \\ud800 allows)."""
    if isinstance(value, str):
        if "\x00" in value:
            return f"{path} contains a NUL character (\\u0000), which cannot be stored"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"{path} contains a lone surrogate (e.g. \\ud800), which is not valid Unicode"
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _unstorable_text(key, f"{path} key") or _unstorable_text(item, f"{path}.{key}")
            if found:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _unstorable_text(item, f"{path}[{i}]")
            if found:
                return found
    return None


class SampleIn(BaseModel):
    model_config = ConfigDict(extra="allow", str_strip_whitespace=False)

    id: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._:\-]+$")] | None = None
    timestamp: Annotated[datetime, BeforeValidator(_parse_timestamp)] | None = Field(
        None, description="epoch seconds or an RFC 3339 string with a zone; default: now"
    )
    tenant: Key | None = None
    segment: Key | None = None
    prompt_version: Key | None = None
    model_version: Key | None = None
    prompt: Text | None = None
    response: Text | None = None
    prompt_tokens: Count | None = None
    completion_tokens: Count | None = None
    finish_reason: Annotated[str, Field(min_length=1, max_length=32)] | None = None
    ttft_ms: Ms | None = None
    tpot_ms: Ms | None = None
    latency_ms: Ms | None = None
    queue_ms: Ms | None = None
    mean_logprob: Annotated[float, Field(le=0, allow_inf_nan=False)] | None = None
    mean_entropy: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    tools: Annotated[list[Key], Field(max_length=256)] | None = None
    eval_score: Annotated[float, Field(allow_inf_nan=False)] | None = None
    prompt_embedding: Vector | None = None
    response_embedding: Vector | None = None
    sample_weight: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 1.0

    @model_validator(mode="before")
    @classmethod
    def _storable_text(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, value in data.items():
                problem = _unstorable_text(key, "a field name") or _unstorable_text(value, f"'{key}'")
                if problem:
                    raise ValueError(problem)
        return data

    @model_validator(mode="after")
    def _prompt_or_tokens_and_evals(self) -> SampleIn:
        if self.prompt is None and self.prompt_tokens is None:
            raise ValueError("a sample needs 'prompt' or 'prompt_tokens'")
        for key, value in (self.model_extra or {}).items():
            if key.startswith("eval_"):
                ok = isinstance(value, int | float) and not isinstance(value, bool)
                if not ok or not math.isfinite(value):
                    raise ValueError(f"field '{key}': evaluator scores must be finite numbers")
        return self

    def to_record(self) -> dict[str, Any]:
        """The record for storage (DESIGN's field names; unknown fields ride along and storage
        keeps them in `extra`, `eval_*` become eval scores). Timestamps go as aware UTC."""
        return self.model_dump(exclude_none=True)


class IngestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    samples: list[SampleIn] = Field(min_length=1)


class IngestResult(BaseModel):
    received: int
    inserted: int
    duplicates: int
