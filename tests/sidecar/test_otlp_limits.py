"""The OTLP receiver's bounds, on SQLite and PostgreSQL: a batch past the sample cap is refused
while it is walked, not after every span was mapped, and the refused work is charged to the
sender's quota (its next batch meets a 429 before the body is parsed); a span past the attribute
budget and a future-dated span are refused alone, the rest of the batch stored. /v1/logs keeps
the same bounds: a body past the byte cap or a batch past the record cap is a 413 charged to the
quota, and a spent quota is a 429 there too."""

from __future__ import annotations

import gzip
import time

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from otlp_logs import chat_span, details_event, event, logs_request, post, traces_request
from sidecar_servers import UvicornThread
from sqlalchemy import func, select

from sidecar.app import create_app
from storage.db import session_factory
from storage.models import Sample

TENANT_KEY = "otlp-limits-tenant-key-0123456789"


@pytest.fixture
def client(migrated_db, make_settings):
    settings = make_settings(
        migrated_db,
        tenant_keys={TENANT_KEY: "acme"},
        ingest_max_bytes=200_000,
        ingest_max_samples=50,
        ingest_rows_per_minute=120,
        otlp_max_span_attributes=32,
        otlp_max_spans=400,
    )
    factory = session_factory(migrated_db)
    with UvicornThread(create_app(settings, factory)) as server, httpx.Client(
        base_url=server.url, timeout=30, headers={"Authorization": f"Bearer {TENANT_KEY}"}
    ) as http:  # fmt: skip
        http.factory = factory
        yield http


def texted(i: int, **extra) -> dict:
    return chat_span(i, **{"gen_ai.prompt": f"q{i}", "gen_ai.completion": f"a{i}", **extra})


def stored(client) -> int:
    with client.factory() as s:
        return s.scalar(select(func.count()).select_from(Sample))


def test_past_the_sample_cap_is_a_413_charged_to_the_quota(client):
    r = post(client, "/v1/traces", traces_request([texted(i) for i in range(51)]))
    assert r.status_code == 413 and "VIGIL_INGEST_MAX_SAMPLES" in r.json()["detail"]
    r = post(client, "/v1/traces", traces_request([texted(i) for i in range(51)]))
    assert r.status_code == 413
    # 2 x 51 rows of refused work charged: 18 rows left of 120, then the quota is spent
    assert (
        post(client, "/v1/traces", traces_request([texted(i) for i in range(18)])).status_code
        == 200
    )
    r = client.post("/v1/traces", content=b"\xff not even protobuf",
                    headers={"Content-Type": "application/x-protobuf"})  # fmt: skip
    assert r.status_code == 429 and r.headers["Retry-After"]  # before the body was parsed
    assert stored(client) == 18


def test_past_the_span_count_json_is_refused_before_it_is_parsed(client):
    spans = [{"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "x"}] * 401  # not GenAI
    started = time.perf_counter()
    r = client.post("/v1/traces", json={"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
    assert r.status_code == 413 and "VIGIL_OTLP_MAX_SPANS" in r.json()["detail"]
    assert time.perf_counter() - started < 5


def test_a_span_past_the_attribute_budget_is_refused_alone(client):
    padded = texted(1, **{f"app.attr{j}": j for j in range(40)})
    r = post(client, "/v1/traces", traces_request([padded, texted(2)]))
    answer = ExportTraceServiceResponse.FromString(r.content).partial_success
    assert r.status_code == 200 and answer.rejected_spans == 1
    assert "VIGIL_OTLP_MAX_SPAN_ATTRIBUTES" in answer.error_message
    assert stored(client) == 1


def test_one_future_dated_span_is_refused_alone_not_the_batch(client):
    request = traces_request([texted(1), texted(2), texted(3)])
    future = request.resource_spans[0].scope_spans[0].spans[1]
    future.end_time_unix_nano += 7 * 24 * 3600 * 10**9
    r = post(client, "/v1/traces", request)
    assert r.status_code == 200, r.text
    answer = ExportTraceServiceResponse.FromString(r.content).partial_success
    assert answer.rejected_spans == 1 and "future" in answer.error_message
    assert stored(client) == 2


def test_past_the_sample_cap_json_is_refused_before_it_is_parsed(client):
    attributes = [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}]
    spans = [{"traceId": "ab" * 16, "spanId": "cd" * 8, "attributes": attributes}] * 51
    r = client.post("/v1/traces", json={"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
    assert r.status_code == 413 and "51 GenAI spans" in r.json()["detail"]


def test_logs_past_the_byte_cap_are_a_413(client):
    big = logs_request([details_event(i, "q" * 1000, "a") for i in range(300)])  # ~330 KB
    assert post(client, "/v1/logs", big).status_code == 413
    r = client.post("/v1/logs", content=gzip.compress(big.SerializeToString()),
                    headers={"Content-Type": "application/x-protobuf",
                             "Content-Encoding": "gzip"})  # fmt: skip
    assert r.status_code == 413 and "VIGIL_INGEST_MAX_BYTES" in r.json()["detail"]


def test_logs_past_the_record_cap_are_a_413_charged_to_the_quota(client):
    many = logs_request([event(i, "gen_ai.user.message", {"content": "q"}) for i in range(401)])
    for _ in range(2):
        r = post(client, "/v1/logs", many)
        assert r.status_code == 413 and "VIGIL_OTLP_MAX_SPANS" in r.json()["detail"]
    # 2 x 50 rows (the sample cap) charged: 20 rows left of 120, then the quota is spent
    r = post(client, "/v1/traces", traces_request([texted(i) for i in range(20)]))
    assert r.status_code == 200
    r = client.post("/v1/logs", content=b"\xff not even protobuf",
                    headers={"Content-Type": "application/x-protobuf"})  # fmt: skip
    assert r.status_code == 429 and r.headers["Retry-After"]  # before the body was parsed
    assert stored(client) == 20
