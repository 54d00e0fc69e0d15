"""`POST /v1/traces`: OTLP/HTTP spans (protobuf or JSON, gzip or not), sample records out
through the ingest API's own write path (sidecar.ingest.write_path: the same record schema, caps,
tenant rules, quota and storage as `POST /v1/ingest`).

The request guard checks the key and bounds the body before this runs; a sender already past
its quota gets the 429 before the body is parsed. The spans are counted before any is mapped
(more than `VIGIL_OTLP_MAX_SPANS` is a 413), GenAI spans counted while they are walked (past
`VIGIL_INGEST_MAX_SAMPLES` the walk stops with a 413), and a span with more than
`VIGIL_OTLP_MAX_SPAN_ATTRIBUTES` attributes is refused alone unread; refused work is charged to
the sender's quota. GenAI spans and OpenInference LLM spans map (sidecar.otlp.spans,
sidecar.otlp.openinference); every other span, and every span that cannot be a valid record or
that the caller's rules refuse (too old, in the future, an eval score off its scale), is counted
in OTLP's `partial_success` with its reason, in `vigil_otlp_rejected_total`, and per sender
(sidecar.otlp.tally). A GenAI client span without text waits in the join buffer
(sidecar.otlp.join_buffer) for the log records that carry it (`POST /v1/logs`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from sidecar.ingest.write_path import IngestPath
from sidecar.otlp import openinference
from sidecar.otlp.decode import PROTOBUF, TRACES, BadPayload, decode
from sidecar.otlp.join_buffer import Held, hold_spans
from sidecar.otlp.records import Refusals, allowed, store_joined, validated
from sidecar.otlp.spans import RESOURCE_KEYS, MapOptions, is_genai, span_record
from sidecar.otlp.tally import REASONS, OtlpTally
from sidecar.otlp.values import attributes
from storage.types import utcnow
from vigil.keys import Principal
from vigil.sample_record import SampleRecord

TRACES_PATH = "/v1/traces"
log = logging.getLogger("vigil.sidecar.otlp")


def _mapped(span: Any, resource: dict[str, Any], options: MapOptions) -> dict[str, Any] | str:
    """The span's record, or a reason key."""
    if is_genai(span):
        mapped = span_record(span, resource, options)
        return "other_operation" if isinstance(mapped, str) else mapped
    attrs = attributes(span.attributes)
    kind = openinference.span_kind(attrs)
    if kind is None:
        return "not_genai"
    if kind != "LLM":
        return "other_operation"
    mapped = span_record(span, resource, options, openinference.genai_attributes(attrs))
    return "other_operation" if isinstance(mapped, str) else mapped


def convert(
    request: Any, principal: Principal, ingest: IngestPath, refusals: Refusals
) -> list[tuple[dict[str, Any], SampleRecord, bool]]:
    """The mapped and valid records of the request's generation spans, in order, each with
    whether it waits for its content as log records (`_waits_for_logs`)."""
    settings = ingest.settings
    options = MapOptions(
        secret=settings.secret_key,
        labels_others=principal.may_label_others,
    )
    out: list[tuple[dict[str, Any], SampleRecord, bool]] = []
    now = utcnow()
    generation = 0
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes, RESOURCE_KEYS)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                if len(span.attributes) > settings.otlp_max_span_attributes:
                    refusals.add(
                        "too_many_attributes",
                        f"a span with {len(span.attributes)} attributes; the limit is "
                        f"{settings.otlp_max_span_attributes} (VIGIL_OTLP_MAX_SPAN_ATTRIBUTES)",
                    )
                    continue
                mapped = _mapped(span, resource, options)
                if isinstance(mapped, str):
                    refusals.add(mapped, REASONS[mapped])
                    continue
                generation += 1
                if generation > settings.ingest_max_samples:
                    ingest.quota.charge(ingest.sender(principal), generation)
                    raise HTTPException(
                        413,
                        f"more than {settings.ingest_max_samples} GenAI spans in one request "
                        "(VIGIL_INGEST_MAX_SAMPLES): export smaller batches",
                    )
                record = validated(mapped, now, settings.max_future_skew_s, refusals)
                if record is not None:
                    out.append((mapped, record, _waits_for_logs(span, mapped)))
    return out


def _waits_for_logs(span: Any, mapped: dict[str, Any]) -> bool:
    """A client span (not a server's, and it names its operation) with no text and an id: its
    instrumentation may send the text as log records. Servers (vLLM, the engine's own spans with
    content capture off) send no content events, so their spans are stored at once."""
    return (
        span.kind != Span.SpanKind.SPAN_KIND_SERVER
        and "operation" in mapped
        and "prompt" not in mapped
        and "response" not in mapped
        and str(mapped.get("id", "")).startswith("otel-")
    )


def _key(mapped: dict[str, Any]) -> tuple[str, str]:
    _, trace_id, span_id = mapped["id"].split("-")
    return trace_id, span_id


def answer(kind: str, refusals: Refusals, message_type: type, field: str, what: str) -> Response:
    response = message_type()
    count = len(refusals)
    if count:
        reasons = "; ".join(f"{n} x {reason}" for reason, n in refusals.messages.most_common(5))
        setattr(response.partial_success, field, count)
        response.partial_success.error_message = f"{count} {what} not stored: {reasons}"[:2000]
    if kind == PROTOBUF:
        return Response(response.SerializeToString(), media_type=PROTOBUF)
    return Response(json_format.MessageToJson(response, indent=None), media_type="application/json")


def receive_traces(
    ingest: IngestPath, tally: OtlpTally, body: bytes, headers: Any, principal: Principal
) -> Response:
    settings = ingest.settings
    sender = ingest.sender(principal)
    if not principal.may_label_others and (wait := ingest.quota.wait_for_room(sender)):
        ingest.refuse(principal, wait)
    try:
        request, kind = decode(
            body,
            headers.get("content-type"),
            headers.get("content-encoding"),
            settings.ingest_max_bytes,
            TRACES,
            settings.otlp_max_spans,
            settings.ingest_max_samples,
        )
    except BadPayload as exc:
        if exc.status == 413:
            ingest.quota.charge(sender, settings.ingest_max_samples)
        return JSONResponse({"detail": exc.reason}, status_code=exc.status)
    refusals = Refusals()
    converted = convert(request, principal, ingest, refusals)
    records = [record for _, record, _ in converted]
    kept = [converted[i] for i in allowed(records, principal, ingest, refusals)]
    ingest.meter(principal, len(kept) + len(refusals.reasons) - refusals.reasons["not_genai"])
    now_records = [record for _, record, waits in kept if not waits]
    if now_records:
        ingest.store(now_records, principal, metered=False)
    waiting = [Held(_key(m), m, principal) for m, _, waits in kept if waits]
    if waiting:
        with ingest.session_factory() as session:
            done, full = hold_spans(
                session, sender, waiting, utcnow(), settings.otlp_join_wait_s,
                settings.otlp_join_max_rows,
            )  # fmt: skip
            session.commit()
        store_joined(ingest, done + full)
    tally.count("spans", refusals.reasons)
    tally.sender(principal.key_id, len(kept), refusals.reasons)
    return answer(kind, refusals, ExportTraceServiceResponse, "rejected_spans", "spans")


def build_otlp_router(
    ingest: IngestPath, require_api_key: Callable[..., Principal], tally: OtlpTally
) -> APIRouter:
    router = APIRouter()

    @router.post(
        TRACES_PATH,
        responses={
            400: {"description": "not an OTLP traces payload"},
            401: {"description": "missing or invalid API key"},
            403: {"description": "a tenant the key may not write"},
            413: {"description": "too large"},
            415: {"description": "not protobuf or JSON"},
            429: {"description": "ingest quota reached"},
        },
    )
    async def traces(request: Request, principal: Principal = Depends(require_api_key)) -> Response:
        """OTLP/HTTP traces (`application/x-protobuf` or `application/json`, gzip allowed):
        GenAI generation spans become sample records; see the module doc."""
        body = await request.body()
        return await run_in_threadpool(
            receive_traces, ingest, tally, body, request.headers, principal
        )

    return router
