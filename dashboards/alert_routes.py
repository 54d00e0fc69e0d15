"""Alert page and on-call actions. Browser forms post to `/alerts/{id}/{action}` and are sent
back to the page; API clients post JSON to `/api/v1/alerts/{id}/{action}` and get the alert's
state. Actions need an admin key (`VIGIL_ADMIN_KEYS`); viewing needs a viewer. A refused form action
is answered with a page that names the key it needs (dashboards/refused.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from sqlalchemy.orm import Session, sessionmaker

from alerts.lifecycle import LifecycleError, acknowledge, resolve, snooze
from dashboards.alert_lead import ratio
from dashboards.alert_page import alert_context
from dashboards.api import Range
from dashboards.pages import RowId
from dashboards.refused import refused
from dashboards.templating import page
from vigil.config import Settings

ACTIONS = ("acknowledge", "snooze", "resolve")
FORM_WORDS = {"acknowledge": "acknowledging", "snooze": "snoozing", "resolve": "resolving"}
MAX_BODY = 16_384


async def read_fields(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise HTTPException(413, "action body too large")
    if request.headers.get("content-type", "").startswith("application/json"):
        try:
            body = json.loads(raw or b"{}")
        except ValueError as exc:
            raise HTTPException(422, f"invalid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise HTTPException(422, "the body must be a JSON object")
        return body
    return {k: v[0] for k, v in parse_qs(raw.decode("utf-8", "replace"), max_num_fields=8).items()}


def snooze_end(fields: dict[str, Any], now: datetime) -> datetime:
    """A snooze end from `until` (ISO 8601) or `hours`."""
    if fields.get("until"):
        try:
            until = datetime.fromisoformat(str(fields["until"]).replace("Z", "+00:00"))
        except ValueError:
            raise HTTPException(422, "until: not an ISO 8601 time") from None
        return until if until.tzinfo else until.replace(tzinfo=UTC)
    try:
        hours = float(fields.get("hours", ""))
    except (TypeError, ValueError):
        raise HTTPException(422, "snooze needs `until` (ISO 8601) or `hours`") from None
    if not 0 < hours <= 24 * 30:
        raise HTTPException(422, "hours: between 0 and 720")
    return now + timedelta(hours=hours)


def build_alert_router(
    settings: Settings, session_factory: sessionmaker[Session], viewer: Callable[..., Any]
) -> APIRouter:
    router = APIRouter()

    def admin(principal: Any = Depends(viewer)) -> Any:
        if not getattr(principal, "admin", False):
            raise HTTPException(403, "alert actions need an admin key (VIGIL_ADMIN_KEYS)")
        return principal

    def act(alert_id: int, action: str, fields: dict[str, Any], actor: str) -> dict[str, Any]:
        if action not in ACTIONS:
            raise HTTPException(404, f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
        now = datetime.now(UTC)
        note = fields.get("note")
        note = str(note) if note not in (None, "") else None
        with session_factory() as session:
            try:
                if action == "acknowledge":
                    alert = acknowledge(session, alert_id, actor=actor, now=now, note=note)
                elif action == "snooze":
                    alert = snooze(
                        session,
                        alert_id,
                        actor=actor,
                        until=snooze_end(fields, now),
                        now=now,
                        note=note,
                    )
                else:
                    alert = resolve(
                        session, alert_id, actor=actor, now=now, settings=settings, note=note
                    )
            except LookupError as exc:
                raise HTTPException(404, str(exc).strip("'\"")) from None
            except LifecycleError as exc:
                raise HTTPException(409, str(exc)) from None
            state = {
                "id": alert.id,
                "status": alert.status,
                "severity": alert.severity,
                "acknowledged_by": alert.acknowledged_by,
                "snoozed_until": alert.snoozed_until.isoformat() if alert.snoozed_until else None,
            }
            session.commit()
        return state

    def _actor(principal: Any) -> str:
        return principal.actor

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

    @router.post("/alerts/{alert_id}/{action}")
    async def form_action(
        alert_id: RowId, action: str, request: Request, principal: Any = Depends(viewer)
    ) -> Response:
        """A browser's form: a refusal is a page that says why, not JSON."""
        what = f"{FORM_WORDS.get(action, action)} alert {alert_id}"
        if not getattr(principal, "admin", False):
            return refused(what, principal, f"/alerts/{alert_id}")
        try:
            act(alert_id, action, await read_fields(request), _actor(principal))
        except HTTPException as exc:
            return refused(
                what, principal, f"/alerts/{alert_id}", status=exc.status_code, why=str(exc.detail)
            )
        return RedirectResponse(f"/alerts/{alert_id}", status_code=303)

    @router.post("/api/v1/alerts/{alert_id}/{action}")
    async def api_action(
        alert_id: RowId, action: str, request: Request, principal: Any = Depends(admin)
    ) -> JSONResponse:
        return JSONResponse(act(alert_id, action, await read_fields(request), _actor(principal)))

    return router
