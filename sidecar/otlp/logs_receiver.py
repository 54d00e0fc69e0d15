"""`POST /v1/logs`: OTLP/HTTP log records (protobuf or JSON, gzip or not) carrying the GenAI
content events of spans (sidecar.otlp.log_content), joined to their span by trace and span id in
the join buffer (sidecar.otlp.join_buffer). The same key check, body bound, quota gate and
redaction as `POST /v1/traces`; a completed span is stored through the ingest write path.

A record that is not a GenAI content event, has no span context, or finds its sender's join
buffer full is counted in `partial_success.rejected_log_records` with its reason and in
`vigil_otlp_rejected_total{signal="logs"}`; the others are accepted (their text reaches the
sample when the span comes, or is dropped with the span's wait when it never does).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from starlette.concurrency import run_in_threadpool

from sidecar.ingest.write_path import IngestPath
from sidecar.otlp.decode import LOGS, BadPayload, decode
from sidecar.otlp.join_buffer import Key, hold_logs
from sidecar.otlp.log_content import log_pieces
from sidecar.otlp.receiver import answer
from sidecar.otlp.records import Refusals, store_joined
from sidecar.otlp.spans import scrub
from sidecar.otlp.tally import REASONS, OtlpTally
from storage.types import utcnow
from vigil.keys import Principal
from vigil.record_redaction import RecordRedaction

LOGS_PATH = "/v1/logs"


def pieces_by_span(
    request: Any, refusals: Refusals, redaction: RecordRedaction
) -> tuple[dict[Key, list[dict[str, Any]]], Counter[Key]]:
    """The content pieces of each span (redacted and cut before they wait anywhere), and how
    many log records gave them."""
    found: dict[Key, list[dict[str, Any]]] = defaultdict(list)
    records: Counter[Key] = Counter()
    position = 0
    for resource_logs in request.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                position += 1
                pieces = log_pieces(record, position)
                if isinstance(pieces, str):
                    refusals.add(pieces, REASONS[pieces])
                    continue
                if len(record.trace_id) != 16 or len(record.span_id) != 8:
                    refusals.add("no_span_context", REASONS["no_span_context"])
                    continue
                key = (record.trace_id.hex(), record.span_id.hex())
                for piece in pieces:
                    piece["text"] = redaction.text(scrub(piece["text"]))
                found[key] += pieces
                records[key] += 1
    return found, records


def receive_logs(
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
            LOGS,
            settings.otlp_max_spans,
        )
    except BadPayload as exc:
        if exc.status == 413:
            ingest.quota.charge(sender, settings.ingest_max_samples)
        return JSONResponse({"detail": exc.reason}, status_code=exc.status)
    refusals = Refusals()
    pieces, records = pieces_by_span(request, refusals, ingest.redaction)
    if pieces:
        with ingest.session_factory() as session:
            done, refused = hold_logs(
                session, sender, dict(pieces), utcnow(), settings.otlp_join_wait_s,
                settings.otlp_join_max_rows,
            )  # fmt: skip
            session.commit()
        for key in refused:
            refusals.add("join_buffer_full", REASONS["join_buffer_full"], records[key])
        store_joined(ingest, done)
    tally.count("logs", refusals.reasons)
    return answer(kind, refusals, ExportLogsServiceResponse, "rejected_log_records", "log records")


def build_logs_router(
    ingest: IngestPath, require_api_key: Callable[..., Principal], tally: OtlpTally
) -> APIRouter:
    router = APIRouter()

    @router.post(
        LOGS_PATH,
        responses={
            400: {"description": "not an OTLP logs payload"},
            401: {"description": "missing or invalid API key"},
            413: {"description": "too large"},
            415: {"description": "not protobuf or JSON"},
            429: {"description": "ingest quota reached"},
        },
    )
    async def logs(request: Request, principal: Principal = Depends(require_api_key)) -> Response:
        """OTLP/HTTP logs: GenAI content events joined to their spans; see the module doc."""
        body = await request.body()
        return await run_in_threadpool(
            receive_logs, ingest, tally, body, request.headers, principal
        )

    return router
