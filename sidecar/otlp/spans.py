"""One OTLP span -> one sample record (a dict for the one record schema), or why not.

A span is GenAI when one of its attributes starts with `gen_ai.`: that test looks only at
attribute keys, so other spans cost one pass over their keys. A GenAI span of another
operation than a generation (embeddings, tools, agents) is skipped too. The record's `id` is
`otel-<trace id>-<span id>`, so an exporter's retry is stored once. User and session ids are
stored as keyed pseudonyms (vigil.pseudonym), never as sent; texts are cut to the record's caps
(the write path's one step, vigil.record_redaction, redacts them); a span without content
still gives its token counts, timings and finish reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sidecar.otlp import names
from sidecar.otlp.content import span_content
from sidecar.otlp.values import attributes, number, text
from vigil.pseudonym import hash_user
from vigil.sample_record import limits

RESOURCE_KEYS = frozenset(names.TENANT + names.SEGMENT + names.PROMPT_VERSION + ("service.name",))


@dataclass(frozen=True)
class MapOptions:
    secret: str  # keys the pseudonyms
    labels_others: bool  # the key may name a tenant (operator and admin keys)


def is_genai(span: Any) -> bool:
    return any(kv.key.startswith(names.GENAI_PREFIX) for kv in span.attributes)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None or seconds < 0 else min(seconds * 1000.0, limits.MAX_MS)


def _label(value: str | None, cap: int) -> str | None:
    return value[:cap] if value else None


def scrub(value: str | None) -> str | None:
    """A text made storable: valid UTF-8, no NUL, cut to the record's cap."""
    if value is None:
        return None
    if not value.isascii():  # ASCII holds no lone surrogate
        value = value.encode("utf-8", "replace").decode("utf-8")
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    return value[: limits.MAX_TEXT_CHARS]


def _count(value: float | None) -> float | None:
    return value if value is None or value != int(value) else int(value)


def span_record(
    span: Any,
    resource: Mapping[str, Any],
    options: MapOptions,
    attrs: Mapping[str, Any] | None = None,
) -> dict[str, Any] | str:
    """The record of a GenAI span (`is_genai` first), or a skip reason (a str). `attrs`: the
    span's attributes when already read (or translated, sidecar.otlp.openinference)."""
    attrs = attributes(span.attributes) if attrs is None else attrs
    operation = text(attrs, names.OPERATION)
    if operation is not None and operation not in names.GENERATION_OPERATIONS:
        return f"operation {operation[:40]!r} is not a generation"
    content = span_content(attrs, span.events)
    labels = {**resource, **{k: attrs[k] for k in RESOURCE_KEYS if k in attrs}}

    start, end = span.start_time_unix_nano, span.end_time_unix_nano
    latency = _ms(number(attrs, names.E2E_S))
    if latency is None and end and start and end >= start:
        latency = min((end - start) / 1e6, limits.MAX_MS)
    ttft = _ms(number(attrs, names.TTFT_S))
    n_out = number(attrs, names.OUTPUT_TOKENS)
    tpot = _ms(number(attrs, names.TPOT_S))
    if tpot is None and ttft is not None and latency is not None and n_out and n_out > 1:
        tpot = max(0.0, latency - ttft) / (n_out - 1)

    record: dict[str, Any] = {
        "timestamp": end / 1e9 if end else None,
        "segment": _label(text(labels, names.SEGMENT), limits.MAX_KEY_CHARS),
        "prompt_version": _label(text(labels, names.PROMPT_VERSION), limits.MAX_KEY_CHARS),
        "model_version": _label(text(attrs, names.MODEL), limits.MAX_KEY_CHARS),
        "prompt": scrub(content.prompt),
        "response": scrub(content.response),
        "prompt_tokens": _count(number(attrs, names.INPUT_TOKENS)),
        "completion_tokens": _count(n_out),
        "finish_reason": _label(
            text(attrs, names.FINISH_REASONS) or content.finish_reason,
            limits.MAX_FINISH_REASON_CHARS,
        ),
        "ttft_ms": ttft,
        "tpot_ms": tpot,
        "latency_ms": latency,
        "queue_ms": _ms(number(attrs, names.QUEUE_S)),
        "tools": [t[: limits.MAX_KEY_CHARS] for t in content.tools if t][: limits.MAX_TOOLS]
        or None,
    }
    weight = number(labels, names.SAMPLE_WEIGHT)
    if weight is not None:
        record["sample_weight"] = weight
    if options.labels_others:
        record["tenant"] = _label(text(labels, names.TENANT), limits.MAX_KEY_CHARS)
    if len(span.trace_id) == 16 and len(span.span_id) == 8:
        record["id"] = f"otel-{span.trace_id.hex()}-{span.span_id.hex()}"
    extras = {
        "request_id": _label(text(attrs, names.REQUEST_ID), limits.MAX_KEY_CHARS),
        "provider": _label(text(attrs, names.PROVIDER), limits.MAX_KEY_CHARS),
        "operation": _label(operation, limits.MAX_KEY_CHARS),
        "service": _label(text(labels, ("service.name",)), limits.MAX_KEY_CHARS),
        "user": hash_user(text(attrs, names.USER), options.secret),
        "session": hash_user(text(attrs, names.CONVERSATION), options.secret),
    }
    record.update({k: v for k, v in extras.items() if v is not None})
    return {k: v for k, v in record.items() if v is not None}
