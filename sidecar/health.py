"""`/health` (the database and the scheduler/leader state) and a quiet `/favicon.ico`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

log = logging.getLogger("vigil.sidecar")


def build_health_router(
    session_factory: sessionmaker[Session], status: Callable[[], dict[str, Any]]
) -> APIRouter:
    router = APIRouter()

    @router.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        return Response(status_code=204)  # browsers ask for it on every page; no 404 noise

    @router.get("/health")
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

    return router
