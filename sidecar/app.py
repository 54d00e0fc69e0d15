"""The sidecar's FastAPI app: `/health`, the ingest API, reports and alert drill-down pages."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import Field, create_model
from sqlalchemy import text
from sqlalchemy.exc import DataError, OperationalError
from sqlalchemy.orm import Session, sessionmaker
from starlette.exceptions import HTTPException

from sidecar.ingest_path import IngestPath
from sidecar.ingest_schema import IngestBody, IngestResult
from sidecar.limits import RequestGuard, body_limit
from sidecar.otlp.receiver import TRACES_PATH, build_otlp_router
from sidecar.page_auth import PageAuth
from sidecar.same_origin import SameOriginActions
from vigil.auth_throttle import throttle_from_settings
from vigil.config import Settings
from vigil.keys import KeyRing, Principal
from vigil.security_headers import SecurityHeaders, docs_urls

INGEST_PATH = "/v1/ingest"
log = logging.getLogger("vigil.sidecar")


def _field_path(loc: tuple[Any, ...]) -> str:
    """("body", "samples", 3, "ttft_ms") -> "samples[3].ttft_ms"."""
    path = ""
    for part in loc[1:] if loc and loc[0] == "body" else loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "body"


def _body_type(model: type) -> Callable:
    """Give a route's `body` parameter a model built at run time (string annotations cannot
    name a local)."""

    def apply(route: Callable) -> Callable:
        route.__annotations__["body"] = model
        return route

    return apply


def create_app(
    settings: Settings,
    session_factory: sessionmaker[Session],
    *,
    status: Callable[[], dict[str, Any]] = lambda: {},
) -> FastAPI:
    """The app; `status()` adds the scheduler/leader state to `/health`."""
    app = FastAPI(title="Vigil sidecar", version="0.1.0", **docs_urls(settings))
    app.state.settings = settings
    app.state.session_factory = session_factory
    keyring = KeyRing.from_settings(settings)
    throttle = throttle_from_settings(settings)  # key checks of the API and the login form alike
    pages = PageAuth(settings, keyring, throttle, session_factory)
    ingest_path = IngestPath.from_settings(settings, session_factory)
    # the key is checked before the body is read, and every body is bounded while it streams
    app.add_middleware(
        RequestGuard,
        keyring=keyring,
        protected=("/v1/",),
        max_bytes=body_limit((INGEST_PATH, TRACES_PATH), settings.ingest_max_bytes),
        body_timeout_s=settings.body_timeout_s,
        throttle=throttle,
        trusted_proxies=tuple(settings.trusted_proxies),
    )
    app.add_middleware(SameOriginActions, public_url=settings.public_url)  # before the key check
    app.add_middleware(SecurityHeaders)

    # pydantic stops at the first sample past the limit: a huge batch is not validated whole
    bounded_body = create_model(
        "IngestBody",
        __base__=IngestBody,
        samples=(
            IngestBody.model_fields["samples"].annotation,
            Field(min_length=1, max_length=settings.ingest_max_samples),
        ),
    )

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        if any(e["loc"] and e["loc"][0] == "path" for e in exc.errors()):
            # an id no row can have (past the column's range, or not a number) names nothing
            return JSONResponse(status_code=404, content={"detail": "not found"})
        if any(
            e["type"] == "too_long" and tuple(e["loc"]) == ("body", "samples") for e in exc.errors()
        ):
            return JSONResponse(
                status_code=413,
                content={
                    "detail": "too many samples in one request; the limit is "
                    f"{settings.ingest_max_samples} "
                    "(VIGIL_INGEST_MAX_SAMPLES): split the batch"
                },
            )
        errors = [
            {"path": _field_path(tuple(e["loc"])), "message": e["msg"], "type": e["type"]}
            for e in exc.errors()
        ]
        shown = "; ".join(f"{e['path']}: {e['message']}" for e in errors[:5])
        return JSONResponse(
            status_code=422,
            content={"detail": f"invalid request: {shown}", "errors": errors[:100]},
        )

    @app.exception_handler(DataError)
    async def _out_of_range(request: Request, exc: DataError) -> JSONResponse:
        # a value the database cannot hold (an id past INTEGER on PostgreSQL): the client's fault
        return JSONResponse(
            status_code=422, content={"detail": "a value in the request is out of range"}
        )

    @app.exception_handler(OperationalError)
    async def _database_down(request: Request, exc: OperationalError) -> JSONResponse:
        # an outage, not a bug: tell the client to retry (nothing was stored)
        return JSONResponse(
            status_code=503,
            headers={"Retry-After": "5"},
            content={"detail": "database unavailable; nothing was stored, retry later"},
        )

    def require_api_key(request: Request) -> Principal:
        principal = request.scope.get("state", {}).get("principal")
        if principal is None:  # the guard sets it on every /v1 path; refuse rather than guess
            raise HTTPException(401, "missing API key: send 'Authorization: Bearer <key>'")
        return principal

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        return Response(status_code=204)  # browsers ask for it on every page; no 404 noise

    @app.get("/health")
    def health() -> JSONResponse:
        try:
            with session_factory() as session:
                session.execute(text("SELECT 1"))
            db_ok = True
        except Exception as exc:  # any driver error means "unhealthy"; the reason goes to the log
            db_ok = False
            log.warning("health: database check failed: %s: %s", exc.__class__.__name__, exc)
        body: dict[str, Any] = {"status": "ok" if db_ok else "degraded", "database": db_ok}
        body.update(status())
        return JSONResponse(body, status_code=200 if db_ok else 503)

    @app.post(
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
        within what the caller may write (sidecar.ingest_policy, sidecar.ingest_quota).
        Idempotent on (tenant, `id`): a sample already stored is counted as a duplicate and left
        untouched."""
        return ingest_path.store(body.samples, principal)

    app.include_router(build_otlp_router(ingest_path, require_api_key))

    from dashboards.pages import build_router

    app.include_router(pages.router())
    app.include_router(
        build_router(settings, session_factory), dependencies=[Depends(pages.require_viewer)]
    )

    from dashboards.routes import build_dashboard_router
    from sidecar.metrics import build_registry, metrics_router

    app.state.metrics_registry = build_registry(settings, session_factory)
    from sidecar.canary.metrics import CanaryCollector

    app.state.metrics_registry.register(CanaryCollector(session_factory))
    app.include_router(
        metrics_router(app.state.metrics_registry), dependencies=[Depends(pages.require_viewer)]
    )
    from sidecar.baseline_ops import baseline_ops

    app.include_router(
        build_dashboard_router(
            settings, session_factory, pages.require_viewer, baseline_ops(settings, session_factory)
        )
    )
    return app
