"""The evaluate job's scores out as OpenTelemetry: with `VIGIL_OTLP_EVAL_ENDPOINT` set, one span
per scored sample carrying one `gen_ai.evaluation.result` event per evaluator
(`gen_ai.evaluation.name`, `gen_ai.evaluation.score.value`, `gen_ai.evaluation.score.label`
for the refusal detector), exported over OTLP/HTTP by the SDK's batch processor.

A sample that arrived as a span (`otel-<trace id>-<span id>`) gets its evaluation as a child of
that span, as the conventions ask, so a tracing backend shows the scores on the request. The
span itself has no `gen_ai.*` attribute: a Vigil receiver at that endpoint skips it. Needs the
OpenTelemetry SDK and OTLP exporter (`opentelemetry-sdk`, `opentelemetry-exporter-otlp-proto-http`);
off, nothing of them is imported. Headers (a key) come from `OTEL_EXPORTER_OTLP_HEADERS`.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from typing import Any

from vigil.config import Settings

_OTEL_ID = re.compile(r"^otel-([0-9a-f]{32})-([0-9a-f]{16})$")
EVENT = "gen_ai.evaluation.result"


class EvalEvents:
    def __init__(self, endpoint: str, exporter: Any | None = None) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(endpoint=endpoint)
        self.provider = TracerProvider(resource=Resource.create({"service.name": "vigil-sidecar"}))
        self.provider.add_span_processor(BatchSpanProcessor(exporter))
        self.tracer = self.provider.get_tracer("vigil.sidecar.evaluate")

    @classmethod
    def from_settings(cls, settings: Settings) -> EvalEvents | None:
        return cls(settings.otlp_eval_endpoint) if settings.otlp_eval_endpoint else None

    def emit(self, rows: list[Any]) -> None:
        """`rows`: EvalScoreRow-like (sample_id, name, score, detail)."""
        from opentelemetry import trace
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

        by_sample: dict[str, list[Any]] = defaultdict(list)
        for row in rows:
            by_sample[row.sample_id].append(row)
        for sample_id, scores in by_sample.items():
            context = None
            match = _OTEL_ID.match(sample_id)
            if match:
                parent = SpanContext(
                    int(match.group(1), 16),
                    int(match.group(2), 16),
                    is_remote=True,
                    trace_flags=TraceFlags(TraceFlags.SAMPLED),
                )
                context = trace.set_span_in_context(NonRecordingSpan(parent))
            span = self.tracer.start_span(
                "evaluation", context=context, attributes={"vigil.sample_id": sample_id}
            )
            for row in scores:
                attributes: dict[str, Any] = {
                    "gen_ai.evaluation.name": row.name,
                    "gen_ai.evaluation.score.value": float(row.score),
                }
                if row.name == "refusal":
                    attributes["gen_ai.evaluation.score.label"] = (
                        "refused" if row.score >= 0.5 else "answered"
                    )
                span.add_event(EVENT, attributes=attributes, timestamp=time.time_ns())
            span.end()

    def close(self, timeout: float = 10.0) -> None:
        self.provider.force_flush(int(timeout * 1000))
        self.provider.shutdown()
