"""`POST /v1/traces`: OTLP/HTTP spans in (protobuf or JSON, gzip or not), sample records out
through the ingest API's own write path (sidecar.ingest.write_path: the same record schema, caps,
tenant rules, quota and storage as `POST /v1/ingest`).

The request guard checks the key and bounds the body before this runs. Spans that are not
GenAI, and GenAI spans of other operations, are skipped; a GenAI span that cannot be a valid
record, or that the caller's rules refuse (too old, an eval score off its scale), is rejected
alone and counted in OTLP's `partial_success` with the reasons. A refusal of the whole batch
(the tenant, the quota, too many spans) is the same 403/413/429 as `/v1/ingest`, and the
exporter keeps its spans (429 carries Retry-After, which OTLP exporters honour).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from sidecar.ingest.write_path import IngestPath
from sidecar.otlp.decode import PROTOBUF, BadPayload, decode
from sidecar.otlp.spans import RESOURCE_KEYS, MapOptions, is_genai, span_record
from sidecar.otlp.values import attributes
from storage.types import utcnow
from vigil.keys import Principal
from vigil.sample_record import SampleRecord

TRACES_PATH = "/v1/traces"
log = logging.getLogger("vigil.sidecar.otlp")


def _problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"]) or "span"
    return f"{where}: {error['msg']}"[:200]


def convert(
    request: Any, principal: Principal, ingest: IngestPath
) -> tuple[list[SampleRecord], Counter[str], int]:
    """Records of the request's generation spans, the rejection reasons, and the skipped count."""
    settings = ingest.settings
    options = MapOptions(
        secret=settings.secret_key,
        labels_others=principal.may_label_others,
    )
    records: list[SampleRecord] = []
    rejected: Counter[str] = Counter()
    skipped = 0
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes, RESOURCE_KEYS)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                if not is_genai(span):
                    skipped += 1
                    continue
                mapped = span_record(span, resource, options)
                if isinstance(mapped, str):
                    skipped += 1
                    continue
                try:
                    records.append(SampleRecord.model_validate(mapped))
                except ValidationError as exc:
                    rejected[_problem(exc)] += 1
    return _allowed(records, principal, ingest, rejected), rejected, skipped


def _allowed(
    records: list[SampleRecord], principal: Principal, ingest: IngestPath, rejected: Counter[str]
) -> list[SampleRecord]:
    """The records the caller's per-sample rules let through (checked on copies: store()
    applies them for real), the others counted in `rejected`. The batch is checked at once;
    only when one is refused are the records checked one by one."""
    now = utcnow()
    try:
        ingest.policy.apply([r.model_copy() for r in records], principal, now)
        return records
    except HTTPException as exc:
        if exc.status_code != 422:
            raise  # a rule about the caller, not a span (the tenant): the whole batch
    allowed = []
    for record in records:
        try:
            ingest.policy.apply([record.model_copy()], principal, now)
        except HTTPException as exc:
            if exc.status_code != 422:
                raise
            rejected[str(exc.detail).removeprefix("samples[0].")[:200]] += 1
            continue
        allowed.append(record)
    return allowed


def _answer(kind: str, rejected: Counter[str], skipped: int) -> Response:
    response = ExportTraceServiceResponse()
    count = sum(rejected.values())
    if count:
        reasons = "; ".join(f"{n} x {reason}" for reason, n in rejected.most_common(5))
        response.partial_success.rejected_spans = count
        response.partial_success.error_message = f"{count} GenAI spans rejected: {reasons}"[:2000]
    if skipped:  # not an error: said as a warning, which OTLP allows with rejected_spans = 0
        note = f"{skipped} spans skipped (not GenAI generation spans)"
        message = response.partial_success.error_message
        response.partial_success.error_message = f"{message}; {note}" if message else note
    if kind == PROTOBUF:
        return Response(response.SerializeToString(), media_type=PROTOBUF)
    return Response(json_format.MessageToJson(response, indent=None), media_type="application/json")


def build_otlp_router(ingest: IngestPath, require_api_key: Callable[..., Principal]) -> APIRouter:
    router = APIRouter()
    max_bytes = ingest.settings.ingest_max_bytes

    def receive(
        body: bytes, content_type: str | None, encoding: str | None, principal: Principal
    ) -> Response:
        try:
            request, kind = decode(body, content_type, encoding, max_bytes)
        except BadPayload as exc:
            return JSONResponse({"detail": exc.reason}, status_code=exc.status)
        records, rejected, skipped = convert(request, principal, ingest)
        if records:
            ingest.store(records, principal)
        return _answer(kind, rejected, skipped)

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
            receive,
            body,
            request.headers.get("content-type"),
            request.headers.get("content-encoding"),
            principal,
        )

    return router
