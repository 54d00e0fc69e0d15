"""The sidecar's FastAPI app: `/health`, the ingest API, reports and alert drill-down pages."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker
from starlette.exceptions import HTTPException

from sidecar.ingest_schema import IngestBody, IngestResult
from sidecar.limits import BodyLimitMiddleware
from vigil.config import Settings

INGEST_PATH = "/v1/ingest"
_bearer = HTTPBearer(auto_error=False)


def _field_path(loc: tuple[Any, ...]) -> str:
    """("body", "samples", 3, "ttft_ms") -> "samples[3].ttft_ms"."""
    path = ""
    for part in loc[1:] if loc and loc[0] == "body" else loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "body"


def create_app(
    settings: Settings,
    session_factory: sessionmaker[Session],
    *,
    status: Callable[[], dict[str, Any]] = lambda: {},
) -> FastAPI:
    """The app; `status()` adds the scheduler/leader state to `/health`."""
    app = FastAPI(title="Vigil sidecar", version="0.1.0")
    app.state.settings = settings
    app.state.session_factory = session_factory
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.ingest_max_bytes, prefixes=(INGEST_PATH,))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"path": _field_path(tuple(e["loc"])), "message": e["msg"], "type": e["type"]}
            for e in exc.errors()
        ]
        shown = "; ".join(f"{e['path']}: {e['message']}" for e in errors[:5])
        return JSONResponse(
            status_code=422,
            content={"detail": f"invalid request: {shown}", "errors": errors[:100]},
        )

    @app.exception_handler(OperationalError)
    async def _database_down(request: Request, exc: OperationalError) -> JSONResponse:
        # an outage, not a bug: tell the client to retry (nothing was stored)
        return JSONResponse(
            status_code=503,
            headers={"Retry-After": "5"},
            content={"detail": "database unavailable; nothing was stored, retry later"},
        )

    def require_api_key(creds: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> None:
        if creds is None or creds.scheme.lower() != "bearer":
            raise HTTPException(401, "missing API key: send 'Authorization: Bearer <key>'")
        token = creds.credentials.encode()
        if not any(hmac.compare_digest(token, key.encode()) for key in settings.api_keys if key):
            raise HTTPException(401, "invalid API key")

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        return Response(status_code=204)  # browsers ask for it on every page; no 404 noise

    @app.get("/health")
    def health() -> JSONResponse:
        try:
            with session_factory() as session:
                session.execute(text("SELECT 1"))
            db_ok = True
        except Exception as exc:  # any driver error means "unhealthy", with the reason
            db_ok, reason = False, f"{exc.__class__.__name__}: {exc}"[:300]
        body: dict[str, Any] = {"status": "ok" if db_ok else "degraded", "database": db_ok}
        if not db_ok:
            body["database_error"] = reason
        body.update(status())
        return JSONResponse(body, status_code=200 if db_ok else 503)

    @app.post(
        INGEST_PATH,
        response_model=IngestResult,
        dependencies=[Depends(require_api_key)],
        responses={401: {"description": "missing or invalid API key"}, 413: {"description": "too large"}},
    )
    def ingest(body: IngestBody) -> IngestResult:
        """Store samples sent by another engine, in DESIGN's sample record shape. Idempotent on
        `id`: a sample already stored is counted as a duplicate and left untouched."""
        if len(body.samples) > settings.ingest_max_samples:
            raise HTTPException(
                413,
                f"{len(body.samples)} samples in one request; the limit is "
                f"{settings.ingest_max_samples} (VIGIL_INGEST_MAX_SAMPLES): split the batch",
            )
        from sidecar.store import ingest_records

        with session_factory() as session:
            result = ingest_records(session, [s.to_record() for s in body.samples])
            session.commit()
        return result

    from dashboards.pages import build_router

    app.include_router(build_router(settings, session_factory))
    return app
