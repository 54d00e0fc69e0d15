"""End to end through OTLP alone, on SQLite and PostgreSQL: a baseline window and a drifted
window arrive only as GenAI spans (semconv 1.37 content attributes) sent by the real
OpenTelemetry SDK's OTLP/HTTP exporter to the sidecar under uvicorn; the embed job, a baseline
built, validated and activated from them, and the drift job follow; the drift reaches a real
webhook receiver as a signed alert."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry.sdk.trace.export import SpanExportResult
from otlp_support import export_protobuf
from sidecar_servers import OPERATOR_KEY, UvicornThread, WebhookReceiver
from sidecar_world import clear_of_window_boundary, last_window
from sqlalchemy import func, select
from traffic_gen import traffic

from alerts.signing import verify
from alerts.worker import DeliveryWorker
from sidecar.app import create_app
from sidecar.jobs.baselines import (
    activate_baseline,
    build_baseline_from_window,
    validate_stored_baseline,
)
from sidecar.jobs.drift import run_drift_job
from sidecar.jobs.embed import run_embed_job
from storage.db import session_factory
from storage.models import Alert, Sample

SECRET = "otlp-e2e-webhook-secret-0123456789"
HOUR = timedelta(hours=1)


def as_span(record: dict) -> tuple[str, dict, int, int]:
    end = int(record["timestamp"] * 1e9)
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": record["model_version"],
        "gen_ai.response.finish_reasons": [record["finish_reason"]],
        "gen_ai.usage.input_tokens": record["prompt_tokens"],
        "gen_ai.usage.output_tokens": record["completion_tokens"],
        "gen_ai.latency.time_to_first_token": record["ttft_ms"] / 1000.0,
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": record["prompt"]}]}]
        ),
        "gen_ai.output.messages": json.dumps(
            [
                {
                    "role": "assistant",
                    "finish_reason": "stop",
                    "parts": [{"type": "text", "content": record["response"]}],
                }
            ]
        ),
        "vigil.tenant": record["tenant"],
        "vigil.segment": record["segment"],
    }
    return "chat smollm2", attributes, end - int(record["latency_ms"] * 1e6), end


def send(url: str, records: list[dict]) -> None:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "shop"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("app")
    for record in records:
        name, attributes, start, end = as_span(record)
        tracer.start_span(name, attributes=attributes, start_time=start).end(end_time=end)
    provider.shutdown()
    spans = list(memory.get_finished_spans())
    for i in range(0, len(spans), 100):  # the exporter's batches
        assert (
            export_protobuf(url, OPERATOR_KEY, spans[i : i + 100], gzip=True)
            is SpanExportResult.SUCCESS
        )


# a whole pipeline on one backend; the storage tests cover both
@pytest.mark.parametrize("migrated_db", ["sqlite"], indirect=True)
def test_drift_seen_only_through_otlp_reaches_a_signed_webhook(
    migrated_db, make_settings, embedder
):
    with WebhookReceiver() as receiver:
        settings = make_settings(
            migrated_db,
            webhook_targets=[receiver.url],
            webhook_secret=SECRET,
            delivery_poll_interval_s=0.2,
            eval_share=0.0,
        )
        factory = session_factory(migrated_db)
        clear_of_window_boundary(settings.drift_interval_s)
        start, end = last_window(settings.drift_interval_s)
        base_start, base_end = start - 4 * HOUR, start - HOUR
        baseline = traffic(base_start, base_end, 240, seed=7)
        drifted = traffic(start, end, 120, seed=8, new_topic_share=0.35)
        with UvicornThread(create_app(settings, factory)) as sidecar:
            send(sidecar.url, baseline + drifted)
        with factory() as s:
            assert s.scalar(select(func.count()).select_from(Sample)) == 360
            assert (
                s.scalar(select(func.count()).select_from(Sample).where(Sample.id.like("otel-%")))
                == 360
            )
            assert {t for (t,) in s.execute(select(Sample.tenant).distinct())} == {"acme"}
        now = datetime.now(UTC)
        run_embed_job(settings, factory, now)
        built = build_baseline_from_window(
            settings, factory, base_start, base_end, name="otlp", now=now
        )
        checked = validate_stored_baseline(settings, factory, built.baseline_id, now=now)
        assert checked.valid, checked.reasons
        activate_baseline(factory, built.baseline_id, now=now)

        [run] = run_drift_job(settings, factory, datetime.now(UTC)).windows
        assert run.status == "done" and run.num_samples == 120
        with factory() as s:
            rules = {(a.rule, a.segment) for a in s.scalars(select(Alert))}
        assert ("prompt_embedding_mmd", "*") in rules, sorted(rules)

        worker = DeliveryWorker(factory, settings=settings).start()
        try:
            deadline = time.monotonic() + 30
            while not receiver.received and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            worker.stop()
        assert receiver.received
        for _path, headers, raw in receiver.received:
            verify(raw, headers, SECRET)  # raises if forged or stale
        assert any("prompt_embedding" in raw.decode() for _p, _h, raw in receiver.received)
