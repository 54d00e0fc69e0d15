"""OTLP bodies of the bench's chats (bench_otlp_ingest): SDK spans with the semconv 1.37 content
attributes (protobuf or OTLP/JSON), and the chats as the official OpenAI instrumentation sends
them with content capture in `event_only` mode: one chat span without text (`POST /v1/traces`)
and one `gen_ai.client.inference.operation.details` log record holding the messages
(`POST /v1/logs`), both with the span's ids, as protobuf."""

from __future__ import annotations

import base64
import json
import os

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def _value(value) -> AnyValue:
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, list):
        return AnyValue(array_value={"values": [_value(v) for v in value]})
    return AnyValue(
        kvlist_value={"values": [KeyValue(key=k, value=_value(v)) for k, v in value.items()]}
    )


def _attrs(mapping: dict) -> list[KeyValue]:
    return [KeyValue(key=k, value=_value(v)) for k, v in mapping.items()]


def span_and_log_bodies(batch: list[dict]) -> tuple[bytes, bytes]:
    traces, logs = ExportTraceServiceRequest(), ExportLogsServiceRequest()
    spans = traces.resource_spans.add().scope_spans.add()
    records = logs.resource_logs.add().scope_logs.add()
    for r in batch:
        trace_id, span_id = os.urandom(16), os.urandom(8)
        end = int(r["timestamp"] * 1e9)
        span = spans.spans.add(trace_id=trace_id, span_id=span_id, name="chat smollm2",
                               start_time_unix_nano=end - int(r["latency_ms"] * 1e6),
                               end_time_unix_nano=end)  # fmt: skip
        span.attributes.extend(_attrs({
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": r["model_version"],
            "gen_ai.usage.input_tokens": r["prompt_tokens"],
            "gen_ai.usage.output_tokens": r["completion_tokens"],
            "gen_ai.response.finish_reasons": [r["finish_reason"]],
            "vigil.segment": r["segment"],
        }))  # fmt: skip
        record = records.log_records.add(
            trace_id=trace_id, span_id=span_id, time_unix_nano=end,
            event_name="gen_ai.client.inference.operation.details",
        )  # fmt: skip
        record.attributes.extend(_attrs({
            "gen_ai.input.messages": [
                {"role": "user", "parts": [{"type": "text", "content": r["prompt"]}]}
            ],
            "gen_ai.output.messages": [
                {"role": "assistant", "finish_reason": "stop",
                 "parts": [{"type": "text", "content": r["response"]}]}
            ],
        }))  # fmt: skip
    return traces.SerializeToString(), logs.SerializeToString()


def spans_of(batch: list[dict]) -> list:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    for r in batch:
        end = int(r["timestamp"] * 1e9)
        span = tracer.start_span(
            "chat smollm2",
            start_time=end - int(r["latency_ms"] * 1e6),
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": r["model_version"],
                "gen_ai.usage.input_tokens": r["prompt_tokens"],
                "gen_ai.usage.output_tokens": r["completion_tokens"],
                "gen_ai.response.finish_reasons": [r["finish_reason"]],
                "vigil.segment": r["segment"],
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": r["prompt"]}]}]
                ),
                "gen_ai.output.messages": json.dumps(
                    [
                        {
                            "role": "assistant",
                            "finish_reason": "stop",
                            "parts": [{"type": "text", "content": r["response"]}],
                        }
                    ]
                ),
            },
        )
        span.end(end_time=end)
    provider.shutdown()
    return list(memory.get_finished_spans())


def otlp_json(spans: list) -> bytes:
    document = json_format.MessageToDict(encode_spans(spans))
    for rs in document.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ("traceId", "spanId"):
                    span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(document).encode()
