"""The caps of the sample record, in one place (the schema, storage and docs read them here)."""

from __future__ import annotations

MAX_ID_CHARS = 64  # samples.id is String(64)
ID_PATTERN = r"^[A-Za-z0-9._:\-]+$"  # UUIDs, request ids; no spaces or control characters
# Names a client chooses (tenant, segment, prompt_version, model_version, embedding_model,
# finish_reason, tool and evaluator names, field names and the keys of unknown fields) label
# pages, reports, metric series and alerts. They hold only these characters, none of which any
# renderer (HTML, JSON inside <script>, Prometheus exposition, PromQL) treats as markup.
NAME_CHARS = "letters A-Z a-z, digits, space and . _ - : / @ +"
NAME_PATTERN = r"^[A-Za-z0-9._:/@+ \-]+$"
MAX_KEY_CHARS = 128  # tenant, segment, prompt_version, model_version, tool names
# a drift segment label `<key>=<value>` (drift_results.segment, alerts.segment): a key of up to
# 15 characters (`prompt_version`), '=', and a value of up to MAX_KEY_CHARS
MAX_SEGMENT_LABEL_CHARS = 256
MAX_FINISH_REASON_CHARS = 32
MAX_TEXT_CHARS = 1_000_000  # prompt, response
MAX_TOKENS = 10_000_000  # prompt_tokens, completion_tokens
MAX_MS = 1e9  # ~11.6 days: no request is slower; larger values are unit mistakes
MAX_LOGPROB_MAGNITUDE = 1e4  # mean_logprob in [-1e4, 0], mean_entropy in [0, 1e4] (nats)
MAX_EVAL_MAGNITUDE = 1e12  # eval scores: finite and small enough that sums stay finite
MAX_TOOLS = 256
MAX_EVAL_NAME_CHARS = 64  # eval_scores.name is String(64)

# sample_weight = 1 / inclusion probability, so the cap is the inverse of the smallest
# sampling rate the engine accepts (VIGIL_SAMPLE_RATE is 0 or >= MIN_SAMPLE_RATE)
MAX_SAMPLE_WEIGHT = 1e6
MIN_SAMPLE_RATE = 1.0 / MAX_SAMPLE_WEIGHT

# embeddings
MAX_EMBEDDING_DIM = 8192
FLOAT32_MAX = 3.4028234663852886e38  # larger magnitudes turn into inf when stored as float32
CLIENT_MODEL_PREFIX = "client:"  # client-supplied vectors live under their own model names
MAX_MODEL_NAME_CHARS = 128 - len(CLIENT_MODEL_PREFIX)  # embeddings.model is String(128)
UNNAMED_CLIENT_MODEL = "unknown"  # vectors sent without `embedding_model`
SIDECAR_MODEL_NAME = "all-MiniLM-L6-v2"  # the sidecar's embedding model (sidecar.embedder reads it)
KNOWN_EMBEDDING_DIMS = {SIDECAR_MODEL_NAME: 384}

# timestamps: epoch seconds or RFC 3339 with a zone, years 1970-2199
MAX_EPOCH_S = 7_258_118_400.0  # 2200-01-01T00:00:00Z
DEFAULT_MAX_FUTURE_SKEW_S = 300.0  # VIGIL_MAX_FUTURE_SKEW_S: later than now + this is refused

# unknown fields (kept in `extra`): JSON values of bounded shape
MAX_FIELD_NAME_CHARS = 128
MAX_EXTRA_DEPTH = 16
MAX_EXTRA_VALUES = 10_000  # strings, numbers, ... counted over all unknown fields of a record
MAX_EXTRA_INT = 2**63 - 1  # integers must fit a 64-bit column or JSON reader
