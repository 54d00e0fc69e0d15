"""Engine spans out: with `VIGIL_OTLP_TRACES_ENDPOINT` set, one OpenTelemetry span per finished
request, in the GenAI semantic conventions, exported over OTLP/HTTP (protobuf) by the SDK's
`BatchSpanProcessor`.

Spans are built on the traffic logger's thread, never on the request path, and batched and
sent by the SDK's own thread. Off (the default), nothing here is imported and the request
path is unchanged. The exporter takes its headers (the sidecar's key:
`OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20<key>`) from OpenTelemetry's own variables.

Attributes: `gen_ai.operation.name` (chat or text_completion), `gen_ai.provider.name`,
`gen_ai.request.model`, `gen_ai.response.model`, `gen_ai.response.id`,
`gen_ai.response.finish_reasons`, `gen_ai.usage.input_tokens` / `output_tokens`, the
timings under vLLM's names (`gen_ai.latency.time_to_first_token`, `e2e`, `time_in_queue`, in
seconds), and the segment labels (`vigil.tenant`, `vigil.segment`, `vigil.prompt_version`).
Prompt and answer text (`gen_ai.input.messages`, `gen_ai.output.messages`) only with
`VIGIL_OTLP_CAPTURE_CONTENT=true`, OpenTelemetry's opt-in rule for content.
"""

from __future__ import annotations

import json
from typing import Any

from serving.traffic.logger import FinishedRequest
from vigil.config import Settings

PROVIDER = "vigil"


def _operation(request_id: str) -> str:
    return "chat" if request_id.startswith("chatcmpl-") else "text_completion"


class EngineSpans:
    def __init__(
        self,
        endpoint: str,
        *,
        model_name: str,
        model_version: str | None = None,
        capture_content: bool = False,
        exporter: Any | None = None,
    ) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.trace import SpanKind

        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(endpoint=endpoint)
        self.provider = TracerProvider(resource=Resource.create({"service.name": "vigil-engine"}))
        self.provider.add_span_processor(BatchSpanProcessor(exporter))
        self.tracer = self.provider.get_tracer("vigil.serving")
        self.kind = SpanKind.SERVER
        self.model_name = model_name
        self.model_version = model_version or model_name
        self.capture_content = capture_content

    @classmethod
    def from_settings(cls, settings: Settings) -> EngineSpans | None:
        if not settings.otlp_traces_endpoint:
            return None
        return cls(
            settings.otlp_traces_endpoint,
            model_name=settings.model_name,
            model_version=settings.model_version,
            capture_content=settings.otlp_capture_content,
        )

    def emit(self, item: FinishedRequest) -> None:
        out, segment = item.output, item.segment
        m = out.metrics
        # engine times are monotonic seconds: place them on the wall clock by the end time
        end_mono = (
            m.finished_time
            if m.finished_time is not None
            else (m.last_token_time or m.arrival_time)
        )
        offset = item.end_time - end_mono

        def ns(mono: float) -> int:
            return int((mono + offset) * 1e9)

        operation = _operation(out.request_id)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": operation,
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.request.model": self.model_name,
            "gen_ai.response.model": self.model_version,
            "gen_ai.response.id": out.request_id,
            "gen_ai.response.finish_reasons": [c.finish_reason or "" for c in out.outputs],
            "gen_ai.usage.input_tokens": len(out.prompt_token_ids),
            "gen_ai.usage.output_tokens": sum(len(c.token_ids) for c in out.outputs),
            "gen_ai.latency.e2e": max(0.0, end_mono - m.arrival_time),
        }
        if m.first_token_time is not None:
            attributes["gen_ai.latency.time_to_first_token"] = max(
                0.0, m.first_token_time - m.arrival_time
            )
        if m.first_scheduled_time is not None:
            attributes["gen_ai.latency.time_in_queue"] = max(
                0.0, m.first_scheduled_time - m.arrival_time
            )
        for name, value in (
            ("vigil.tenant", segment.tenant),
            ("vigil.segment", segment.segment),
            ("vigil.prompt_version", segment.prompt_version),
        ):
            if value:
                attributes[name] = value
        if self.capture_content:
            attributes["gen_ai.input.messages"] = json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": out.prompt or ""}]}]
            )
            attributes["gen_ai.output.messages"] = json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": c.text}],
                        "finish_reason": c.finish_reason or "",
                    }
                    for c in out.outputs
                ]
            )
        span = self.tracer.start_span(
            f"{operation} {self.model_name}",
            kind=self.kind,
            start_time=ns(m.arrival_time),
            attributes=attributes,
        )
        span.end(end_time=ns(end_mono))

    def close(self, timeout: float = 10.0) -> None:
        self.provider.force_flush(int(timeout * 1000))
        self.provider.shutdown()
