"""Per-request statistics and the sample record (docs/architecture.md) built from them."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from typing import Any

from serving.outputs import CompletionOutput, RequestOutput
from serving.traffic.sampler import SampleDecision
from serving.traffic.segments import SegmentInfo
from vigil.sample_record import limits
from vigil.sample_record.names import safe_name


@dataclass
class RequestStats:
    """What one generated completion cost and looked like (times in milliseconds)."""

    prompt: str
    response: str
    prompt_tokens: int | None  # None: not known (an upstream answer without usage)
    completion_tokens: int
    finish_reason: str | None
    queue_ms: float | None
    ttft_ms: float | None
    tpot_ms: float | None  # mean time per output token after the first
    latency_ms: float | None
    mean_logprob: float | None
    mean_entropy: float | None
    end_time: float  # epoch seconds at request end
    tools: list[str] = field(default_factory=list)


def _ms(start: float | None, end: float | None) -> float | None:
    if start is None or end is None:
        return None
    return max(0.0, (end - start) * 1000.0)


def stats_from_output(
    output: RequestOutput,
    choice: CompletionOutput,
    *,
    end_time: float,
    tools: list[str] | None = None,
) -> RequestStats:
    """Statistics of `choice` in the finished `output`; engine timestamps are monotonic seconds."""
    m = output.metrics
    end = m.finished_time if m.finished_time is not None else m.last_token_time
    n_out = len(choice.token_ids)
    tpot = None
    decoding = _ms(m.first_token_time, m.last_token_time)
    if n_out > 1 and decoding is not None:
        tpot = decoding / (n_out - 1)
    return RequestStats(
        prompt=output.prompt or "",
        response=choice.text,
        prompt_tokens=len(output.prompt_token_ids),
        completion_tokens=n_out,
        finish_reason=choice.finish_reason,
        queue_ms=_ms(m.arrival_time, m.first_scheduled_time),
        ttft_ms=_ms(m.arrival_time, m.first_token_time),
        tpot_ms=tpot,
        latency_ms=_ms(m.arrival_time, end),
        mean_logprob=choice.mean_logprob,
        mean_entropy=choice.mean_entropy,
        end_time=end_time,
        tools=list(tools or []),
    )


def build_record(
    stats: RequestStats,
    segment: SegmentInfo,
    decision: SampleDecision,
    *,
    model_version: str | None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The sample record for storage's writer, valid under the one record schema
    (`vigil.sample_record`): text made storable and cut to its caps, statistics clamped to
    their ranges (NaN/inf become null). Fields outside the fixed set (user, metadata, request
    ids from `extra`) sit at the top level, where storage keeps them in the row's `extra`.
    PII redaction is storage's writer's (vigil.record_redaction, the one step of every path)."""
    scrub = _storable

    record: dict[str, Any] = {
        "id": str(uuid.uuid4()),
        "timestamp": stats.end_time,
        "tenant": segment.tenant,
        "segment": segment.segment,
        "prompt_version": segment.prompt_version,
        "model_version": _label(model_version, limits.MAX_KEY_CHARS),
        "prompt": scrub(stats.prompt)[: limits.MAX_TEXT_CHARS],
        "response": scrub(stats.response)[: limits.MAX_TEXT_CHARS],
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.completion_tokens,
        "finish_reason": _label(stats.finish_reason, limits.MAX_FINISH_REASON_CHARS),
        "ttft_ms": _within(stats.ttft_ms, 0.0, limits.MAX_MS),
        "tpot_ms": _within(stats.tpot_ms, 0.0, limits.MAX_MS),
        "latency_ms": _within(stats.latency_ms, 0.0, limits.MAX_MS),
        "queue_ms": _within(stats.queue_ms, 0.0, limits.MAX_MS),
        # rounding can leave a mean log-probability a hair above 0
        "mean_logprob": _within(stats.mean_logprob, -limits.MAX_LOGPROB_MAGNITUDE, 0.0),
        "mean_entropy": _within(stats.mean_entropy, 0.0, limits.MAX_LOGPROB_MAGNITUDE),
        "tools": _tool_names(stats.tools),
        "sample_weight": min(decision.weight, limits.MAX_SAMPLE_WEIGHT),
    }
    if segment.user:
        record["user"] = scrub(segment.user)
    known = {"tenant", "segment", "prompt_version"}
    metadata = {k: scrub(v) for k, v in segment.metadata.items() if k not in known}
    if metadata:
        record["metadata"] = metadata
    for key, value in (extra or {}).items():
        record.setdefault(key, value)
    return record


def _storable(text: str) -> str:
    """PostgreSQL text cannot hold NUL or lone surrogates: replace them rather than lose the row."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def _within(value: float | None, lo: float, hi: float) -> float | None:
    """Storage refuses NaN/inf; an undefined statistic is stored as NULL, others clamped."""
    if value is None or not math.isfinite(value):
        return None
    return min(max(float(value), lo), hi)


def _label(value: str | None, max_chars: int) -> str | None:
    """A short label column: the record's safe name characters (others become `_`), cut to its
    column, empty means absent."""
    return (safe_name(value[:max_chars]) or None) if value is not None else None


def _tool_names(tools: list[str]) -> list[str]:
    names = (_label(t, limits.MAX_KEY_CHARS) for t in tools)
    return [n for n in names if n][: limits.MAX_TOOLS]
