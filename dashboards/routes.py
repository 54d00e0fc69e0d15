"""The dashboard's routes in one router: the overview (`/`), chart data (`/api/v1/...`) and
the static files. `viewer` is the sidecar's auth dependency; every route here sits behind it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query
from fastapi.responses import FileResponse, HTMLResponse
from sqlalchemy.orm import Session, sessionmaker

from dashboards.alert_routes import build_alert_router
from dashboards.api import Range, build_api_router
from dashboards.baselines_page import BaselineOps, build_baselines_router, judge_validity
from dashboards.charts import warm_registry
from dashboards.cluster_page import build_cluster_router
from dashboards.incident_list_routes import build_incident_list_router
from dashboards.incident_page import build_incident_router
from dashboards.overview import overview_context
from dashboards.segment_page import build_segment_router
from dashboards.silence_routes import build_silence_router
from dashboards.templating import STATIC, page
from vigil.config import Settings

STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".txt": "text/plain"}


def static_file(path: str) -> FileResponse:
    """A file under dashboards/static, never outside it."""
    target = (STATIC / path).resolve()
    if STATIC not in target.parents or not target.is_file() or target.suffix not in STATIC_TYPES:
        raise HTTPException(404, "no such static file")
    return FileResponse(
        target,
        media_type=STATIC_TYPES[target.suffix],
        headers={"Cache-Control": "max-age=3600", "X-Content-Type-Options": "nosniff"},
    )


def build_dashboard_router(
    settings: Settings,
    session_factory: sessionmaker[Session],
    viewer: Callable[..., object],
    baseline_ops: BaselineOps | None = None,
) -> APIRouter:
    warm_registry()
    router = APIRouter(dependencies=[Depends(viewer)])
    judge_note = judge_validity(settings.judge_model or settings.model_name, settings.judge_auc)
    router.include_router(
        build_baselines_router(session_factory, viewer, baseline_ops, judge_note=judge_note)
    )
    router.include_router(build_api_router(session_factory))
    router.include_router(build_alert_router(settings, session_factory, viewer))
    router.include_router(build_incident_list_router(session_factory))
    router.include_router(build_silence_router(session_factory, viewer))  # before the actions
    router.include_router(build_incident_router(settings, session_factory, viewer))
    router.include_router(build_segment_router(session_factory))
    router.include_router(build_cluster_router(session_factory))

    @router.get("/static/{path:path}", include_in_schema=False)
    def static(path: str) -> FileResponse:
        return static_file(path)

    @router.get("/", response_class=HTMLResponse)
    def overview(range: Annotated[Range, Query()] = Range.day) -> HTMLResponse:
        with session_factory() as session:
            context = overview_context(session, range.value, datetime.now(UTC))
        return page(
            "overview.html", title="Vigil overview", ranges=[r.value for r in Range], **context
        )

    return router
