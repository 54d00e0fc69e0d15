"""POST /v1/traces with spans from the real OpenTelemetry SDK, sent by its OTLP/HTTP protobuf
exporter (plain and gzip) and as OTLP/JSON to the sidecar under uvicorn, on SQLite and
PostgreSQL: semconv 1.37 content, deprecated names and vLLM's attributes all map; other spans
are skipped and bad GenAI spans rejected alone, each counted with its reason in partial_success;
bad payloads are refused whole."""

from __future__ import annotations

import gzip
import json

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace.export import SpanExportResult
from otlp_support import (
    VLLM_SPAN_NAME,
    export_json,
    export_protobuf,
    make_spans,
    otlp_json,
    semconv_chat_attributes,
    vllm_attributes,
)
from sidecar_servers import API_KEY, OPERATOR_KEY, UvicornThread
from sqlalchemy import func, select

from sidecar.app import create_app
from storage.db import session_factory
from storage.models import Sample
from vigil.pseudonym import hash_user

TENANT_KEY = "otlp-tenant-key-0123456789"


@pytest.fixture
def server(migrated_db, make_settings):
    settings = make_settings(
        migrated_db, ingest_max_bytes=200_000, tenant_keys={TENANT_KEY: "acme"}
    )
    factory = session_factory(migrated_db)
    with UvicornThread(create_app(settings, factory)) as srv:
        srv.factory, srv.settings = factory, settings
        yield srv


def rows(server) -> list[Sample]:
    with server.factory() as s:
        return list(s.scalars(select(Sample).order_by(Sample.prompt_tokens)))


def test_semconv_content_attributes_map_through_the_protobuf_exporter(server):
    spans = make_spans(
        [("chat gpt-4o-mini", semconv_chat_attributes(1))],
        resource={"service.name": "shop", "vigil.segment": "web"},
    )
    assert export_protobuf(server.url, API_KEY, spans) is SpanExportResult.SUCCESS
    [row] = rows(server)
    span = spans[0]
    assert row.id == f"otel-{span.context.trace_id:032x}-{span.context.span_id:016x}"
    assert row.source == "ingest" and row.segment == "web" and row.tenant is None
    assert row.prompt == "Be brief.\nWhat is 1 + 1?" and row.response == "2."
    assert (row.prompt_tokens, row.completion_tokens, row.finish_reason) == (21, 7, "stop")
    assert row.model_version == "gpt-4o-mini-2024-07-18"
    assert row.latency_ms == pytest.approx(500.0, abs=0.01) and row.ttft_ms is None
    assert row.tools == ["calculator"]
    assert row.extra["user"] == hash_user("person1@example.com", server.settings.secret_key)
    assert "example.com" not in json.dumps(row.extra)
    assert row.extra["request_id"] == "chatcmpl-1" and row.extra["provider"] == "openai"
    assert row.extra["service"] == "shop" and row.extra["operation"] == "chat"


def test_vllm_request_spans_map_through_otlp_json(server):
    spans = make_spans([(VLLM_SPAN_NAME, vllm_attributes(i)) for i in range(3)])
    r = export_json(server.url, API_KEY, spans)
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json"), r.text
    assert "partialSuccess" not in r.json() or not r.json()["partialSuccess"].get("rejectedSpans")
    stored = rows(server)
    assert [row.prompt_tokens for row in stored] == [42, 43, 44]
    row = stored[0]
    assert row.prompt is None and row.response is None  # vLLM exports no content
    assert row.completion_tokens == 11 and row.finish_reason == "stop"
    assert row.model_version == "meta-llama/Llama-3.1-8B-Instruct"
    assert row.ttft_ms == pytest.approx(125.0) and row.latency_ms == pytest.approx(625.0)
    assert row.queue_ms == pytest.approx(4.0) and row.tpot_ms == pytest.approx(50.0)  # (625-125)/10
    assert row.extra["request_id"] == "cmpl-vllm-0"


def test_deprecated_names_map_through_the_gzip_exporter(server):
    old = {
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-3.5-turbo",
        "gen_ai.usage.prompt_tokens": 9,
        "gen_ai.usage.completion_tokens": 3,
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "You help.",
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": "Hi there",
        "gen_ai.completion.0.content": "Hello!",
        "gen_ai.completion.0.finish_reason": "length",
    }
    spans = make_spans([("openai.chat", old)])
    assert export_protobuf(server.url, API_KEY, spans, gzip=True) is SpanExportResult.SUCCESS
    [row] = rows(server)
    assert row.prompt == "You help.\nHi there" and row.response == "Hello!"
    assert (row.prompt_tokens, row.completion_tokens, row.finish_reason) == (9, 3, "length")
    assert row.model_version == "gpt-3.5-turbo" and row.extra["provider"] == "openai"


def test_other_spans_are_skipped_bad_genai_spans_rejected_alone_and_retries_stored_once(server):
    good = semconv_chat_attributes(2)
    spans = make_spans(
        [
            ("GET /", {"http.request.method": "GET"}),  # not GenAI
            (
                "embeddings x",
                {"gen_ai.operation.name": "embeddings", "gen_ai.usage.input_tokens": 4},
            ),
            ("chat bad", {**good, "gen_ai.usage.input_tokens": -5}),  # out of range
            (
                "chat empty",
                {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"},
            ),  # nothing to keep
            ("chat good", good),
        ]
    )
    for _ in range(2):  # an exporter's retry: the same spans again
        r = export_json(server.url, API_KEY, spans)
        assert r.status_code == 200, r.text
        partial = r.json()["partialSuccess"]
        # every span not stored is counted, the skipped ones too, each with its reason
        assert int(partial["rejectedSpans"]) == 4
        assert (
            "prompt_tokens" in partial["errorMessage"]
            and "'prompt' or 'prompt_tokens'" in partial["errorMessage"]
        )
        assert "1 x not a GenAI generation span" in partial["errorMessage"]
        assert "1 x a GenAI span of another operation" in partial["errorMessage"]
    assert [row.prompt_tokens for row in rows(server)] == [22]


def test_protobuf_answer_carries_partial_success(server):
    spans = make_spans(
        [("chat", {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 1.5})]
    )
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    r = httpx.post(
        f"{server.url}/v1/traces",
        content=encode_spans(spans).SerializeToString(),
        headers={"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/x-protobuf"},
    )
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-protobuf"
    answer = ExportTraceServiceResponse.FromString(r.content)
    assert (
        answer.partial_success.rejected_spans == 1
        and "integer" in answer.partial_success.error_message
    )
    assert rows(server) == []


def test_tenant_comes_from_the_key_and_a_span_attribute_only_for_operator_keys(server):
    labelled = {**vllm_attributes(0), "vigil.tenant": "globex"}
    assert (
        export_json(server.url, TENANT_KEY, make_spans([(VLLM_SPAN_NAME, labelled)])).status_code
        == 200
    )
    assert (
        export_json(
            server.url,
            API_KEY,
            make_spans([(VLLM_SPAN_NAME, vllm_attributes(1))], resource={"vigil.tenant": "globex"}),
        ).status_code
        == 200
    )
    assert (
        export_json(
            server.url,
            OPERATOR_KEY,
            make_spans([(VLLM_SPAN_NAME, {**vllm_attributes(2), "vigil.tenant": "initech"})]),
        ).status_code
        == 200
    )
    assert [row.tenant for row in rows(server)] == ["acme", None, "initech"]


@pytest.mark.parametrize(
    ("body", "headers", "status", "words"),
    [
        (
            b"\x0a\xff\xff\xff\xff\x0f",
            {"Content-Type": "application/x-protobuf"},
            400,
            "not an OTLP",
        ),
        (b"{not json", {"Content-Type": "application/json"}, 400, "not JSON"),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}',
            {"Content-Type": "application/json"},
            400,
            "not hex",
        ),
        (b'{"resourceSpans": 3}', {"Content-Type": "application/json"}, 400, "OTLP/JSON"),
        (b"x", {"Content-Type": "text/plain"}, 415, "Content-Type"),
        (
            b"x",
            {"Content-Type": "application/json", "Content-Encoding": "br"},
            415,
            "Content-Encoding",
        ),
        (
            b"\x1f\x8b\x08\x00garbage",
            {"Content-Type": "application/json", "Content-Encoding": "gzip"},
            400,
            "gzip",
        ),
        (
            gzip.compress(b" " * 300_000),
            {"Content-Type": "application/json", "Content-Encoding": "gzip"},
            413,
            "inflates",
        ),
        (b"0" * 250_000, {"Content-Type": "application/json"}, 413, ""),
    ],
)
def test_bad_payloads_are_refused_with_a_reason(server, body, headers, status, words):
    r = httpx.post(
        f"{server.url}/v1/traces",
        content=body,
        headers={"Authorization": f"Bearer {API_KEY}", **headers},
    )
    assert r.status_code == status, r.text
    assert words in r.text
    assert rows(server) == []


def test_the_key_is_checked_before_the_body(server):
    spans = make_spans([(VLLM_SPAN_NAME, vllm_attributes())])
    r = httpx.post(f"{server.url}/v1/traces", json=otlp_json(spans))
    assert r.status_code == 401
    assert export_protobuf(server.url, "wrong-key-0123456789", spans) is SpanExportResult.FAILURE
    with server.factory() as s:
        assert s.scalar(select(func.count()).select_from(Sample)) == 0
