"""The evaluate job's scores go out as `gen_ai.evaluation.result` events over OTLP when
VIGIL_OTLP_EVAL_ENDPOINT is set: a sample that came in as a span gets its evaluation as a child
of that span (same trace, that span as parent), one event per evaluator with its score."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from sidecar_servers import JudgeEngine, WebhookReceiver

from sidecar.evals.judge import Judge
from sidecar.jobs import evaluate
from sidecar.jobs.evaluate import SETTLE_S, run_evaluate_job
from storage.db import session_factory
from storage.repositories.samples import insert_samples

TRACE, SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"


def test_scores_go_out_as_evaluation_events_under_the_samples_span(
    migrated_db, make_settings, embedder
):
    with JudgeEngine() as engine, WebhookReceiver() as collector:
        endpoint = collector.url.replace("/hook", "/v1/traces")
        settings = make_settings(
            migrated_db, eval_share=1.0, engine_url=engine.url, otlp_eval_endpoint=endpoint
        )
        factory = session_factory(migrated_db)
        now = datetime.now(UTC)
        with factory() as s:
            insert_samples(
                s,
                [
                    {
                        "id": f"otel-{TRACE}-{SPAN}",
                        "timestamp": now.timestamp() - 120,
                        "prompt": "How do I roast salmon fillets?",
                        "response": "Roast salmon fillets in a hot oven until flaky.",
                    },
                    {
                        "id": "plain-1",
                        "timestamp": now.timestamp() - 100,
                        "prompt": "Is Patagonia expensive to visit?",
                        "response": "I cannot help with that.",
                    },
                ],
            )
            s.commit()
        judge = Judge(engine.url, "judge-model")
        try:
            result = run_evaluate_job(
                settings, factory, now + timedelta(seconds=SETTLE_S + 1), judge=judge
            )
        finally:
            judge.close()
        assert result.judged == 2
        evaluate._events(endpoint).provider.force_flush(10_000)
        deadline = time.monotonic() + 10
        while not collector.received and time.monotonic() < deadline:
            time.sleep(0.05)
    spans = []
    for path, headers, raw in collector.received:
        assert (
            path == "/v1/traces"
            and {k.lower(): v for k, v in headers.items()}["content-type"]
            == "application/x-protobuf"
        )
        request = ExportTraceServiceRequest.FromString(raw)
        spans += [
            span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans
        ]
    by_sample = {
        next(kv.value.string_value for kv in span.attributes if kv.key == "vigil.sample_id"): span
        for span in spans
    }
    assert set(by_sample) == {f"otel-{TRACE}-{SPAN}", "plain-1"}
    child = by_sample[f"otel-{TRACE}-{SPAN}"]
    assert child.trace_id.hex() == TRACE and child.parent_span_id.hex() == SPAN
    assert by_sample["plain-1"].trace_id.hex() != TRACE and not by_sample["plain-1"].parent_span_id
    for span in spans:
        events = {}
        for event in span.events:
            assert event.name == "gen_ai.evaluation.result"
            attrs = {kv.key: kv.value for kv in event.attributes}
            events[attrs["gen_ai.evaluation.name"].string_value] = attrs
        assert set(events) == {"judge", "relevancy", "refusal"}
        assert 1.0 <= events["judge"]["gen_ai.evaluation.score.value"].double_value <= 5.0
    refusal = {
        s: next(
            e for e in span.events if any(kv.value.string_value == "refusal" for kv in e.attributes)
        )
        for s, span in by_sample.items()
    }
    labels = {
        s: next(
            kv.value.string_value
            for kv in e.attributes
            if kv.key == "gen_ai.evaluation.score.label"
        )
        for s, e in refusal.items()
    }
    assert labels == {f"otel-{TRACE}-{SPAN}": "answered", "plain-1": "refused"}
