"""OTLP log requests and GenAI spans built from the protobuf messages, with chosen trace and span
ids, so a test can send a span and its content log records separately, in either order."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


def any_value(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, list | tuple):
        return AnyValue(array_value={"values": [any_value(v) for v in value]})
    if isinstance(value, dict):
        return AnyValue(
            kvlist_value={"values": [KeyValue(key=k, value=any_value(v)) for k, v in value.items()]}
        )
    raise TypeError(type(value))


def ids(i: int) -> tuple[bytes, bytes]:
    return (0xA000 + i).to_bytes(16, "big"), (0xB000 + i).to_bytes(8, "big")


def chat_span(i: int, **extra: Any) -> dict[str, Any]:
    """A chat client span without content (its instrumentation sends content as logs)."""
    return {
        "i": i,
        "attributes": {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.usage.input_tokens": 10 + i,
            "gen_ai.usage.output_tokens": 4,
            **extra,
        },
    }


def traces_request(spans: list[dict[str, Any]]) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    now = time.time_ns()
    for spec in spans:
        trace_id, span_id = ids(spec["i"])
        span = scope.spans.add(
            trace_id=trace_id,
            span_id=span_id,
            name="chat gpt-4o-mini",
            start_time_unix_nano=now - 500_000_000,
            end_time_unix_nano=now,
        )
        span.attributes.extend(
            KeyValue(key=k, value=any_value(v)) for k, v in spec["attributes"].items()
        )
    return request


def event(i: int | None, name: str, body: Any = None, **attributes: Any) -> dict[str, Any]:
    return {"i": i, "name": name, "body": body, "attributes": attributes}


def logs_request(events: list[dict[str, Any]]) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    scope = request.resource_logs.add().scope_logs.add()
    now = time.time_ns()
    for n, spec in enumerate(events):
        record = scope.log_records.add(time_unix_nano=now + n, event_name=spec["name"])
        if spec["i"] is not None:
            record.trace_id, record.span_id = ids(spec["i"])
        if spec["body"] is not None:
            record.body.CopyFrom(any_value(spec["body"]))
        record.attributes.extend(
            KeyValue(key=k, value=any_value(v)) for k, v in spec["attributes"].items()
        )
    return request


def legacy_events(i: int, prompt: str, answer: str) -> list[dict[str, Any]]:
    """The official instrumentation's events before the 1.37 conventions."""
    return [
        event(i, "gen_ai.system.message", {"content": "Be brief."}),
        event(i, "gen_ai.user.message", {"content": prompt}),
        event(i, "gen_ai.choice", {"index": 0, "finish_reason": "stop",
                                   "message": {"role": "assistant", "content": answer}}),
    ]  # fmt: skip


def details_event(i: int, prompt: str, answer: str) -> dict[str, Any]:
    """The 1.37+ inference details event: the whole call in its attributes."""
    return event(
        i,
        "gen_ai.client.inference.operation.details",
        **{
            "gen_ai.input.messages": [
                {"role": "user", "parts": [{"type": "text", "content": prompt}]}
            ],
            "gen_ai.output.messages": [
                {"role": "assistant", "finish_reason": "stop",
                 "parts": [{"type": "text", "content": answer}]}
            ],
        },
    )  # fmt: skip


def post(client: httpx.Client, path: str, message: Any, as_json: bool = False) -> httpx.Response:
    if as_json:
        document = json_format.MessageToDict(message)
        for resource in document.get("resourceLogs", document.get("resourceSpans", [])):
            for scope in resource.get("scopeLogs", resource.get("scopeSpans", [])):
                for item in scope.get("logRecords", scope.get("spans", [])):
                    for key in ("traceId", "spanId"):
                        if key in item:
                            import base64

                            item[key] = base64.b64decode(item[key]).hex()
        return client.post(path, content=json.dumps(document),
                           headers={"Content-Type": "application/json"})  # fmt: skip
    return client.post(path, content=message.SerializeToString(),
                       headers={"Content-Type": "application/x-protobuf"})  # fmt: skip
