"""POST /v1/logs and the join buffer, on SQLite and PostgreSQL, through a sidecar under uvicorn:
content log records meet their span in either order and across requests; a span whose logs never
come is stored without text when it expires; the buffer holds at most its size per sender;
senders never join each other's spans; records that carry nothing are counted by reason."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from otlp_logs import (
    chat_span,
    details_event,
    event,
    legacy_events,
    logs_request,
    post,
    traces_request,
)
from prometheus_client import generate_latest
from sidecar_servers import API_KEY, UvicornThread
from sqlalchemy import func, select

from sidecar.app import create_app
from sidecar.otlp.join_job import run_join_job
from storage.db import session_factory
from storage.models import OtlpPending, Sample

TENANT_A, TENANT_B = "otlp-tenant-a-key-0123456789", "otlp-tenant-b-key-0123456789"


@pytest.fixture
def world(migrated_db, make_settings, request):
    overrides = getattr(request, "param", {})
    settings = make_settings(
        migrated_db, tenant_keys={TENANT_A: "acme", TENANT_B: "globex"}, **overrides
    )
    factory = session_factory(migrated_db)
    app = create_app(settings, factory)
    with UvicornThread(app) as server:
        clients = {
            key: httpx.Client(
                base_url=server.url, timeout=30, headers={"Authorization": f"Bearer {key}"}
            )  # fmt: skip
            for key in (API_KEY, TENANT_A, TENANT_B)
        }
        yield settings, factory, app, clients
        for client in clients.values():
            client.close()


def samples(factory) -> dict[str, Sample]:
    with factory() as s:
        return {row.id.split("-")[-1]: row for row in s.scalars(select(Sample))}


def pending(factory) -> int:
    with factory() as s:
        return s.scalar(select(func.count()).select_from(OtlpPending))


def test_logs_before_or_after_their_span_in_separate_requests_give_the_text(world):
    settings, factory, _app, clients = world
    client = clients[API_KEY]
    # span 1: its logs first (protobuf), then the span; span 2: the span first, then logs (JSON)
    assert (
        post(client, "/v1/logs", logs_request(legacy_events(1, "Hi one?", "One."))).status_code
        == 200
    )
    assert pending(factory) == 1
    assert (
        post(client, "/v1/traces", traces_request([chat_span(1), chat_span(2)])).status_code == 200
    )
    assert pending(factory) == 1  # span 2 waits; span 1 is stored
    r = post(client, "/v1/logs", logs_request([details_event(2, "Hi two?", "Two.")]), as_json=True)
    assert r.status_code == 200 and not r.json().get("partialSuccess"), r.text
    assert pending(factory) == 0
    rows = samples(factory)
    one, two = rows[f"{0xB001:016x}"], rows[f"{0xB002:016x}"]
    assert (one.prompt, one.response, one.finish_reason) == ("Be brief.\nHi one?", "One.", "stop")
    assert (two.prompt, two.response) == ("Hi two?", "Two.")
    assert (one.prompt_tokens, one.completion_tokens, one.model_version) == (11, 4, "gpt-4o-mini")


def test_gzip_logs_are_read(world):
    _settings, factory, _app, clients = world
    body = gzip.compress(logs_request([details_event(3, "Zip?", "Zipped.")]).SerializeToString())
    r = clients[API_KEY].post("/v1/logs", content=body, headers={
        "Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"})  # fmt: skip
    assert r.status_code == 200, r.text
    post(clients[API_KEY], "/v1/traces", traces_request([chat_span(3)]))
    assert samples(factory)[f"{0xB003:016x}"].response == "Zipped."


def test_a_span_whose_logs_never_come_is_stored_without_text_when_it_expires(world):
    settings, factory, _app, clients = world
    post(clients[API_KEY], "/v1/traces", traces_request([chat_span(4)]))
    post(clients[API_KEY], "/v1/logs", logs_request([details_event(99, "orphan", "log")]))
    assert samples(factory) == {} and pending(factory) == 2
    early = run_join_job(settings, factory, datetime.now(UTC))
    assert early == {"spans": 0, "logs_expired": 0}
    later = datetime.now(UTC) + timedelta(seconds=settings.otlp_join_wait_s + 1)
    assert run_join_job(settings, factory, later) == {"spans": 1, "logs_expired": 1}
    row = samples(factory)[f"{0xB004:016x}"]
    assert row.prompt is None and row.response is None and row.prompt_tokens == 14
    assert pending(factory) == 0


@pytest.mark.parametrize("world", [{"otlp_join_max_rows": 3}], indirect=True)
def test_the_join_buffer_holds_at_most_its_size_per_sender(world):
    _settings, factory, _app, clients = world
    r = post(clients[TENANT_A], "/v1/traces", traces_request([chat_span(i) for i in range(10, 15)]))
    assert r.status_code == 200
    assert pending(factory) == 3 and len(samples(factory)) == 2  # stored at once, without text
    r = post(clients[TENANT_A], "/v1/logs", logs_request([details_event(50, "x", "y")]))
    answer = ExportLogsServiceResponse.FromString(r.content).partial_success
    assert answer.rejected_log_records == 1 and "join buffer is full" in answer.error_message
    # another sender has its own room
    r = post(clients[TENANT_B], "/v1/logs", logs_request([details_event(51, "x", "y")]), True)
    assert r.status_code == 200 and not r.json().get("partialSuccess"), r.text
    assert pending(factory) == 4


def test_one_senders_logs_never_complete_anothers_span(world):
    _settings, factory, _app, clients = world
    post(clients[TENANT_A], "/v1/traces", traces_request([chat_span(20)]))
    post(clients[TENANT_B], "/v1/logs", logs_request([details_event(20, "steal?", "no")]))
    assert samples(factory) == {} and pending(factory) == 2
    post(clients[TENANT_A], "/v1/logs", logs_request([details_event(20, "mine", "yes")]))
    [row] = samples(factory).values()
    assert (row.tenant, row.prompt, row.response) == ("acme", "mine", "yes")


def test_records_that_carry_nothing_are_counted_by_reason(world):
    _settings, _factory, app, clients = world
    batch = logs_request([
        event(30, "app.started", "hello"),  # not a GenAI content event
        event(None, "gen_ai.choice", {"index": 0, "message": {"content": "lost"}}),  # no span
    ])  # fmt: skip
    r = post(clients[API_KEY], "/v1/logs", batch)
    answer = ExportLogsServiceResponse.FromString(r.content)
    assert answer.partial_success.rejected_log_records == 2
    assert "not a GenAI content event" in answer.partial_success.error_message
    assert "no trace and span id" in answer.partial_success.error_message
    metrics = generate_latest(app.state.metrics_registry).decode()
    assert 'vigil_otlp_rejected_total{reason="no_span_context",signal="logs"} 1.0' in metrics


def test_a_sender_of_only_unmappable_spans_shows_on_the_health_page(world):
    _settings, _factory, _app, clients = world
    unmapped = traces_request([{"i": 40, "attributes": {"llm.model": "x", "http.method": "GET"}}])
    r = post(clients[TENANT_A], "/v1/traces", unmapped)
    assert r.status_code == 200
    health = clients[API_KEY].get("/health").json()
    [sender] = health["otlp"]["senders_with_only_unmapped_spans"]
    assert sender["spans"] == 1 and "not a GenAI generation span" in sender["reason"]
    assert "acme" not in str(health)  # the key's digest names the sender, not its tenant


def test_a_span_and_its_logs_join_across_replicas(world):
    settings, factory, _app, clients = world
    with UvicornThread(create_app(settings, factory)) as replica, httpx.Client(
        base_url=replica.url, timeout=30, headers={"Authorization": f"Bearer {TENANT_A}"}
    ) as other:  # fmt: skip
        post(clients[TENANT_A], "/v1/traces", traces_request([chat_span(60)]))
        post(other, "/v1/logs", logs_request(legacy_events(60, "Where?", "There.")))
    [row] = samples(factory).values()
    assert (row.prompt, row.response) == ("Be brief.\nWhere?", "There.") and pending(factory) == 0


@pytest.mark.parametrize("world", [{"redact_pii": True}], indirect=True)
def test_log_content_is_redacted_before_it_waits_or_is_stored(world):
    _settings, factory, _app, clients = world
    post(
        clients[API_KEY], "/v1/logs", logs_request(legacy_events(70, "I am jane@example.com", "Hi"))
    )
    with factory() as s:
        [waiting] = s.scalars(select(OtlpPending)).all()
        assert "jane@example.com" not in waiting.body and "[EMAIL]" in waiting.body
    post(clients[API_KEY], "/v1/traces", traces_request([chat_span(70)]))
    [row] = samples(factory).values()
    assert row.prompt == "Be brief.\nI am [EMAIL]"
