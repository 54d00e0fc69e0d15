"""How the sidecar answers a request it cannot serve: invalid input names the field (422), a
batch past the sample limit is 413, a value the database cannot hold is 422, a database outage
is 503 with Retry-After."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, OperationalError

from vigil.config import Settings


def _field_path(loc: tuple[Any, ...]) -> str:
    """("body", "samples", 3, "ttft_ms") -> "samples[3].ttft_ms"."""
    path = ""
    for part in loc[1:] if loc and loc[0] == "body" else loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "body"


def install_error_handlers(app: FastAPI, settings: Settings) -> None:
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
