"""Spans made by the real OpenTelemetry SDK, sent with its OTLP/HTTP protobuf exporter or as
OTLP/JSON (the Python SDK has no JSON exporter: its own encoder's message, written in the
OTLP/JSON mapping with hex ids), and vLLM's request span attributes."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

# vLLM's request span as its tracing code names the attributes (vllm/tracing: SpanAttributes);
# its span is named "llm_request", latencies are seconds, finish reasons an array.
VLLM_SPAN_NAME = "llm_request"


def vllm_attributes(i: int = 0) -> dict[str, Any]:
    return {
        "gen_ai.response.model": "meta-llama/Llama-3.1-8B-Instruct",
        "gen_ai.request.id": f"cmpl-vllm-{i}",
        "gen_ai.request.temperature": 0.7,
        "gen_ai.request.top_p": 0.95,
        "gen_ai.request.max_tokens": 256,
        "gen_ai.request.n": 1,
        "gen_ai.usage.num_sequences": 1,
        "gen_ai.usage.prompt_tokens": 42 + i,
        "gen_ai.usage.completion_tokens": 11,
        "gen_ai.latency.time_in_queue": 0.004,
        "gen_ai.latency.time_to_first_token": 0.125,
        "gen_ai.latency.e2e": 0.625,
        "gen_ai.latency.time_in_scheduler": 0.002,
        "gen_ai.latency.time_in_model_forward": 0.3,
        "gen_ai.latency.time_in_model_execute": 0.35,
        "gen_ai.latency.time_in_model_prefill": 0.1,
        "gen_ai.latency.time_in_model_decode": 0.5,
        "gen_ai.latency.time_in_model_inference": 0.6,
        "gen_ai.response.finish_reasons": ["stop"],
    }


def semconv_chat_attributes(
    i: int = 0, prompt: str | None = None, answer: str | None = None
) -> dict[str, Any]:
    """A chat span with the 1.37+ content attributes (JSON strings, as SDKs record them)."""
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.response.id": f"chatcmpl-{i}",
        "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.usage.input_tokens": 20 + i,
        "gen_ai.usage.output_tokens": 7,
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
        "gen_ai.input.messages": json.dumps(
            [
                {
                    "role": "user",
                    "parts": [{"type": "text", "content": prompt or f"What is {i} + {i}?"}],
                }
            ]
        ),
        "gen_ai.output.messages": json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [
                        {"type": "text", "content": answer or f"{2 * i}."},
                        {
                            "type": "tool_call",
                            "id": "c1",
                            "name": "calculator",
                            "arguments": {"a": i},
                        },
                    ],
                    "finish_reason": "stop",
                }
            ]
        ),
        "user.id": f"person{i}@example.com",
    }


def make_spans(
    specs: Sequence[tuple[str, Mapping[str, Any]]],
    resource: Mapping[str, Any] | None = None,
    duration_s: float = 0.5,
) -> list[ReadableSpan]:
    """Finished SDK spans, one per (name, attributes), ending now."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create(dict(resource or {"service.name": "app"})))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("vigil-tests")
    for name, attributes in specs:
        end = time.time_ns()
        span = tracer.start_span(
            name, attributes=dict(attributes), start_time=end - int(duration_s * 1e9)
        )
        span.end(end_time=end)
    provider.shutdown()
    return list(memory.get_finished_spans())


def export_protobuf(
    url: str, key: str, spans: Sequence[ReadableSpan], gzip: bool = False
) -> SpanExportResult:
    exporter = OTLPSpanExporter(
        endpoint=f"{url}/v1/traces",
        headers={"Authorization": f"Bearer {key}"},
        compression=Compression.Gzip if gzip else Compression.NoCompression,
        timeout=30,
    )
    try:
        return exporter.export(spans)
    finally:
        exporter.shutdown()


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """The OTLP/JSON document of `spans`: camelCase keys, ids as hex (not protobuf's base64)."""
    document = json_format.MessageToDict(encode_spans(spans))
    for resource in document.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return document


def export_json(url: str, key: str, spans: Sequence[ReadableSpan]) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/traces",
        json=otlp_json(spans),
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
