"""`POST /v1/ingest`: samples sent by another engine, stored through the one write path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import Field, create_model
from starlette.exceptions import HTTPException

from sidecar.ingest.schema import IngestBody, IngestResult
from sidecar.ingest.write_path import IngestPath
from vigil.config import Settings
from vigil.keys import Principal

INGEST_PATH = "/v1/ingest"


Route = Callable[..., Any]
SAMPLES_TYPE: Any = IngestBody.model_fields["samples"].annotation  # list[SampleRecord]


def require_api_key(request: Request) -> Principal:
    """The caller the request guard (sidecar.limits) authenticated on a `/v1/` path."""
    principal: Principal | None = request.scope.get("state", {}).get("principal")
    if principal is None:  # the guard sets it on every /v1 path; refuse rather than guess
        raise HTTPException(401, "missing API key: send 'Authorization: Bearer <key>'")
    return principal


def _body_type(model: type) -> Callable[[Route], Route]:
    """Give a route's `body` parameter a model built at run time (string annotations cannot
    name a local)."""

    def apply(route: Route) -> Route:
        route.__annotations__["body"] = model
        return route

    return apply


def build_ingest_router(settings: Settings, write_path: IngestPath) -> APIRouter:
    router = APIRouter()
    # pydantic stops at the first sample past the limit: a huge batch is not validated whole
    bounded_body = create_model(
        "IngestBody",
        __base__=IngestBody,
        samples=(
            SAMPLES_TYPE,
            Field(min_length=1, max_length=settings.ingest_max_samples),
        ),
    )

    @router.post(
        INGEST_PATH,
        response_model=IngestResult,
        dependencies=[Depends(require_api_key)],
        responses={
            401: {"description": "missing or invalid API key"},
            403: {"description": "a tenant the key may not write"},
            413: {"description": "too large"},
            429: {"description": "ingest quota reached"},
        },
    )
    @_body_type(bounded_body)
    def ingest(body: IngestBody, principal: Principal = Depends(require_api_key)) -> IngestResult:
        """Store samples sent by another engine, in the one record schema (`vigil.sample_record`),
        within what the caller may write (sidecar.ingest.policy, sidecar.ingest.quota).
        Idempotent on (tenant, `id`): a sample already stored is counted as a duplicate and left
        untouched."""
        return write_path.store(body.samples, principal)

    return router
