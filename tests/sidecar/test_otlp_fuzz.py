"""Span and log-record shapes from hypothesis (known GenAI and OpenInference names and others,
the GenAI content events, every AnyValue kind, odd ids and times, as protobuf or OTLP/JSON) sent
over real HTTP: always 200 or a 4xx, never a 5xx, and every answer a valid OTLP response or a
reason; each request is answered within a time bound (hypothesis' deadline) and a memory bound
(tracemalloc's peak, server thread included); the join buffer never holds more than its size."""

from __future__ import annotations

import json
import tracemalloc

import httpx
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from sidecar_servers import API_KEY, UvicornThread
from sqlalchemy import func, select

from sidecar.app import create_app
from sidecar.otlp import names
from sidecar.otlp.log_content import CONTENT_EVENTS
from storage.db import session_factory
from storage.models import OtlpPending

KNOWN = sorted(
    {
        *names.VLLM_ATTRIBUTES,
        *names.INPUT_TOKENS,
        *names.OUTPUT_TOKENS,
        *names.MODEL,
        *names.TTFT_S,
        *names.PROVIDER,
        *names.USER,
        *names.CONVERSATION,
        *names.TENANT,
        *names.SEGMENT,
        *names.SAMPLE_WEIGHT,
        names.INPUT_MESSAGES,
        names.OUTPUT_MESSAGES,
        names.SYSTEM_INSTRUCTIONS,
        "gen_ai.operation.name",
        "gen_ai.prompt",
        "gen_ai.completion",
        "gen_ai.prompt.0.content",
        "gen_ai.completion.0.finish_reason",
        "openinference.span.kind",
        "llm.input_messages.0.message.content",
        "llm.input_messages.0.message.contents.1.message_content.text",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name",
        "llm.output_messages.0.message.content",
        "input.value",
        "input.mime_type",
        "output.value",
        "output.mime_type",
        "llm.invocation_parameters",
        "llm.token_count.prompt",
        "llm.model_name",
    }
)
DEADLINE_MS = 5000  # per example: a parse that went quadratic or hung fails here
PEAK_BYTES = 16 << 20  # per request: about 1 MB is what these bodies take; a blow-up fails here

texts = st.text(max_size=40)
messages = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "assistant"]),
            "parts": st.lists(
                st.fixed_dictionaries(
                    {
                        "type": st.sampled_from(["text", "tool_call", "x"]),
                        "content": texts,
                        "name": texts,
                    }
                ),
                max_size=2,
            ),
        }
    ),
    max_size=3,
)


def any_values(depth: int = 2):
    leaves = st.one_of(
        texts.map(lambda v: AnyValue(string_value=v)),
        messages.map(lambda m: AnyValue(string_value=json.dumps(m))),
        st.sampled_from(
            ["chat", "embeddings", "stop", "text_completion", "LLM", "CHAIN", "application/json"]
        ).map(lambda v: AnyValue(string_value=v)),
        st.integers(-(2**63), 2**63 - 1).map(lambda v: AnyValue(int_value=v)),
        st.floats(allow_nan=True, allow_infinity=True).map(lambda v: AnyValue(double_value=v)),
        st.booleans().map(lambda v: AnyValue(bool_value=v)),
        st.binary(max_size=8).map(lambda v: AnyValue(bytes_value=v)),
    )
    if depth == 0:
        return leaves
    inner = any_values(depth - 1)
    return st.one_of(
        leaves,
        st.lists(inner, max_size=3).map(lambda vs: AnyValue(array_value={"values": vs})),
        st.dictionaries(texts, inner, max_size=3).map(
            lambda d: AnyValue(
                kvlist_value={"values": [KeyValue(key=k, value=v) for k, v in d.items()]}
            )
        ),
    )


attribute_lists = st.lists(
    st.tuples(st.one_of(st.sampled_from(KNOWN), texts), any_values()), max_size=12
)
spans = st.fixed_dictionaries(
    {
        "trace_id": st.binary(max_size=17),
        "span_id": st.binary(max_size=9),
        "name": texts,
        "start_time_unix_nano": st.integers(0, 2**64 - 1),
        "end_time_unix_nano": st.integers(0, 2**64 - 1),
        "attributes": attribute_lists,
    }
)


def request_of(batch: list[dict], resource: list) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.extend(KeyValue(key=k, value=v) for k, v in resource)
    scope = rs.scope_spans.add()
    for spec in batch:
        span = scope.spans.add(
            trace_id=spec["trace_id"],
            span_id=spec["span_id"],
            name=spec["name"],
            start_time_unix_nano=spec["start_time_unix_nano"],
            end_time_unix_nano=spec["end_time_unix_nano"],
        )
        span.attributes.extend(KeyValue(key=k, value=v) for k, v in spec["attributes"])
    return request


def post_bounded(client: httpx.Client, path: str, content: str | bytes, ctype: str):
    """POST and hold the request to the memory bound: tracemalloc sees every thread, so the
    server's parse, join and writes count too."""
    tracemalloc.start()
    try:
        r = client.post(path, content=content, headers={"Content-Type": ctype})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= PEAK_BYTES, f"{peak} bytes at peak for a {len(content)}-byte body"
    return r


def test_span_shapes_never_get_a_5xx(migrated_db, make_settings):
    app = create_app(
        make_settings(migrated_db, ingest_max_bytes=200_000), session_factory(migrated_db)
    )
    seen: dict[int, int] = {}
    with (
        UvicornThread(app) as server,
        httpx.Client(
            base_url=server.url, timeout=30, headers={"Authorization": f"Bearer {API_KEY}"}
        ) as client,
    ):

        @settings(max_examples=60, deadline=DEADLINE_MS, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(batch=st.lists(spans, max_size=4), resource=attribute_lists, as_json=st.booleans())
        def check(batch, resource, as_json) -> None:
            request = request_of(batch, resource)
            if as_json:  # protobuf's JSON mapping: base64 ids, which the receiver reads as hex
                body, ctype = json_format.MessageToJson(request), "application/json"
            else:
                body, ctype = request.SerializeToString(), "application/x-protobuf"
            r = post_bounded(client, "/v1/traces", body, ctype)
            seen[r.status_code] = seen.get(r.status_code, 0) + 1
            assert r.status_code < 500, r.text[:500]
            if r.status_code == 200 and not as_json:
                ExportTraceServiceResponse.FromString(r.content)
            elif r.status_code >= 400:
                assert r.json()["detail"], r.text

        check()
    assert seen.get(200, 0) >= 10, seen


log_records = st.fixed_dictionaries(
    {
        "trace_id": st.sampled_from([b"\x01" * 16, b""]) | st.binary(max_size=17),
        "span_id": st.sampled_from([b"\x02" * 8, b""]) | st.binary(max_size=9),
        "event_name": st.sampled_from(sorted(CONTENT_EVENTS)) | texts,
        "time_unix_nano": st.integers(0, 2**64 - 1),
        "body": st.none() | any_values(),
        "attributes": attribute_lists,
    }
)


def logs_of(batch: list[dict]) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    scope = request.resource_logs.add().scope_logs.add()
    for spec in batch:
        record = scope.log_records.add(
            trace_id=spec["trace_id"],
            span_id=spec["span_id"],
            event_name=spec["event_name"],
            time_unix_nano=spec["time_unix_nano"],
        )
        if spec["body"] is not None:
            record.body.CopyFrom(spec["body"])
        record.attributes.extend(KeyValue(key=k, value=v) for k, v in spec["attributes"])
    return request


def test_log_record_shapes_never_get_a_5xx_and_the_buffer_stays_bounded(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    app = create_app(
        make_settings(migrated_db, ingest_max_bytes=200_000, otlp_join_max_rows=20), factory
    )
    seen: dict[int, int] = {}
    with (
        UvicornThread(app) as server,
        httpx.Client(
            base_url=server.url, timeout=30, headers={"Authorization": f"Bearer {API_KEY}"}
        ) as client,
    ):

        @settings(max_examples=60, deadline=DEADLINE_MS, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(batch=st.lists(log_records, max_size=5), as_json=st.booleans())
        def check(batch, as_json) -> None:
            request = logs_of(batch)
            if as_json:
                body, ctype = json_format.MessageToJson(request), "application/json"
            else:
                body, ctype = request.SerializeToString(), "application/x-protobuf"
            r = post_bounded(client, "/v1/logs", body, ctype)
            seen[r.status_code] = seen.get(r.status_code, 0) + 1
            assert r.status_code < 500, r.text[:500]
            if r.status_code == 200 and not as_json:
                ExportLogsServiceResponse.FromString(r.content)
            elif r.status_code >= 400:
                assert r.json()["detail"], r.text
            with factory() as s:
                assert s.scalar(select(func.count()).select_from(OtlpPending)) <= 20

        check()
    assert seen.get(200, 0) >= 10, seen
