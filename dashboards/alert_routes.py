"""The alert page, `/alerts/{id}` (a viewer key), and the on-call actions on alerts from
dashboards/lifecycle_routes.py: `/alerts/{id}/{action}` for forms, `/api/v1/alerts/{id}/{action}`
for API clients, an admin key for either."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session, sessionmaker

from alerts import lifecycle
from dashboards.alert_lead import ratio
from dashboards.alert_page import alert_context
from dashboards.api import Range
from dashboards.lifecycle_routes import add_action_routes
from dashboards.pages import RowId
from dashboards.templating import page
from vigil.config import Settings


def build_alert_router(
    settings: Settings, session_factory: sessionmaker[Session], viewer: Callable[..., Any]
) -> APIRouter:
    router = APIRouter()

    @router.get("/alerts/{alert_id}", response_class=HTMLResponse)
    def alert_page(alert_id: RowId, range: Range = Range.week) -> HTMLResponse:
        with session_factory() as session:
            context = alert_context(session, alert_id, datetime.now(UTC), range.value)
            alert = context["alert"]
            return page(
                "alert_page.html",
                title=f"Alert {alert.id}: {alert.rule} ({alert.severity})",
                ranges=[r.value for r in Range],
                ratio=ratio,
                **context,
            )

    add_action_routes(
        router, noun="alert", lifecycle=lifecycle, settings=settings,
        session_factory=session_factory, viewer=viewer,
    )  # fmt: skip
    return router
