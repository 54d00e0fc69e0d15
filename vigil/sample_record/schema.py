"""The sample record: one schema for `POST /v1/ingest`, storage's writer and `vigil check`.

A record is one JSON object. Rules (the caps live in `vigil.sample_record.limits`):

- Absent and `null` are the same for every field.
- `prompt` or `prompt_tokens` must be present (an embedding alone is not a sample).
- `id`: 1-64 characters of `A-Z a-z 0-9 . _ : -`; storage makes a UUID4 when absent.
- `timestamp`: epoch seconds (a finite number in [0, 7258118400)) or an RFC 3339 string with a
  zone (`Z` or `+hh:mm`), years 1970-2199; storage uses "now" when absent. Later than now plus
  `VIGIL_MAX_FUTURE_SKEW_S` (default 300 s) is refused (`check_not_future`).
- `tenant`, `segment`, `prompt_version`, `model_version`, each entry of `tools`: 1-128
  characters; `finish_reason` 1-32; `prompt`, `response` at most 1,000,000; at most 256 tools.
- Names (those fields, `embedding_model`, evaluator names, field names and every key inside
  unknown fields) hold only letters A-Z a-z, digits, space and . _ - : / @ +.
- No text anywhere (field names, nested values included) may hold NUL or a lone surrogate.
- Numbers are JSON numbers (never strings or booleans) and finite (no NaN/inf):
  `prompt_tokens`, `completion_tokens` integers in [0, 1e7] (3.0 counts as 3);
  `ttft_ms`, `tpot_ms`, `latency_ms`, `queue_ms` in [0, 1e9]; `mean_logprob` in [-1e4, 0];
  `mean_entropy` in [0, 1e4]; `eval_score` and every `eval_<name>` within +-1e12, `<name>`
  1-64 characters; `sample_weight` in (0, 1e6], default 1 (1e6 = 1 / the smallest sampling
  rate the engine accepts, 1e-6).
- `prompt_embedding`, `response_embedding`: 1-8192 finite numbers within float32 range. When
  both are given they have one dimension. `embedding_model` (1-128 characters with the
  `client:` prefix) names the model; a name with a known dimension (the sidecar's own
  all-MiniLM-L6-v2: 384) must match it. Storage keeps these vectors under `client:<name>`
  (`client:unknown` without a name), apart from the sidecar's own, and refuses a vector whose
  dimension differs from the first one its tenant stored for that `client:` model.
- Unknown fields are kept (storage puts them in the row's `extra` column) when they are JSON
  values: names 1-128 characters, finite numbers, integers within 64 bits, at most 16 levels
  deep and 10,000 values per record.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator, model_validator

from vigil.sample_record import limits
from vigil.sample_record.extras import check_eval_score, check_field_name, check_json_value
from vigil.sample_record.fields import (
    Count,
    Entropy,
    FinishReason,
    Key,
    LogProb,
    Millis,
    ModelName,
    SampleId,
    Score,
    Text,
    Timestamp,
    Tools,
    Vector,
    Weight,
)

EMBEDDING_FIELDS = ("prompt_embedding", "response_embedding")


def client_model_name(name: str | None) -> str:
    """The model name client-supplied vectors are stored under: always `client:`-prefixed."""
    name = name or limits.UNNAMED_CLIENT_MODEL
    return (
        name if name.startswith(limits.CLIENT_MODEL_PREFIX) else limits.CLIENT_MODEL_PREFIX + name
    )


def _describe_rules(schema: dict[str, Any]) -> None:
    schema["description"] = __doc__  # the exported JSON Schema carries the rules above


class SampleRecord(BaseModel):
    """One logged request (see the module doc for the rules)."""

    model_config = ConfigDict(
        extra="allow", protected_namespaces=(), json_schema_extra=_describe_rules
    )

    id: SampleId | None = None
    timestamp: Timestamp | None = None
    tenant: Key | None = None
    segment: Key | None = None
    prompt_version: Key | None = None
    model_version: Key | None = None
    prompt: Text | None = None
    response: Text | None = None
    prompt_tokens: Count | None = None
    completion_tokens: Count | None = None
    finish_reason: FinishReason | None = None
    ttft_ms: Millis | None = None
    tpot_ms: Millis | None = None
    latency_ms: Millis | None = None
    queue_ms: Millis | None = None
    mean_logprob: LogProb | None = None
    mean_entropy: Entropy | None = None
    tools: Tools | None = None
    eval_score: Score | None = None
    sample_weight: Weight = 1.0
    # before the vectors: their check reads it
    embedding_model: ModelName | None = None
    prompt_embedding: Vector | None = None
    response_embedding: Vector | None = None

    @model_validator(mode="before")
    @classmethod
    def _object_without_nulls(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError(f"a sample record is a JSON object, got {type(data).__name__}")
        for name in data:
            check_field_name(name)
        return {k: v for k, v in data.items() if v is not None}

    @field_validator("sample_weight", mode="before")
    @classmethod
    def _weight_default_for_null(cls, value: Any) -> Any:
        return 1.0 if value is None else value

    @field_validator(*EMBEDDING_FIELDS)
    @classmethod
    def _one_dimension(cls, vector: list[float] | None, info: ValidationInfo) -> list[float] | None:
        if vector is None:
            return None
        model = info.data.get("embedding_model")
        bare = model.removeprefix(limits.CLIENT_MODEL_PREFIX) if model else None
        known = limits.KNOWN_EMBEDDING_DIMS.get(bare) if bare else None
        if known is not None and len(vector) != known:
            raise ValueError(f"has {len(vector)} values; {bare} vectors have {known}")
        other = info.data.get("prompt_embedding")
        if (
            info.field_name == "response_embedding"
            and other is not None
            and len(other) != len(vector)
        ):
            raise ValueError(
                f"has {len(vector)} values but prompt_embedding has {len(other)}: "
                "both vectors of a record come from one model"
            )
        return vector

    @model_validator(mode="after")
    def _prompt_and_unknown_fields(self) -> SampleRecord:
        if self.prompt is None and self.prompt_tokens is None:
            raise ValueError("a sample needs 'prompt' or 'prompt_tokens'")
        extra = self.model_extra or {}
        for name, value in extra.items():
            if name.startswith("eval_"):
                extra[name] = check_eval_score(name, value)
            else:
                check_json_value(value, name[:40])
        return self

    # views for the paths that consume a record

    @property
    def eval_scores(self) -> dict[str, float]:
        """Evaluator name -> score: `eval_score` is "default", `eval_<name>` is `<name>`."""
        scores = {} if self.eval_score is None else {"default": self.eval_score}
        for name, value in (self.model_extra or {}).items():
            if name.startswith("eval_"):
                scores[name[len("eval_") :]] = value
        return scores

    @property
    def unknown_fields(self) -> dict[str, Any]:
        """The fields outside the schema, eval scores excepted: what storage keeps in `extra`."""
        return {k: v for k, v in (self.model_extra or {}).items() if not k.startswith("eval_")}

    @property
    def embeddings(self) -> dict[str, list[float]]:
        """ "prompt"/"response" -> vector, for the vectors the record carries."""
        pairs = (("prompt", self.prompt_embedding), ("response", self.response_embedding))
        return {field: vec for field, vec in pairs if vec is not None}

    @property
    def stored_embedding_model(self) -> str:
        return client_model_name(self.embedding_model)

    def timestamp_or(self, default: datetime) -> datetime:
        return self.timestamp if self.timestamp is not None else default
