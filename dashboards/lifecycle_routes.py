"""On-call actions (acknowledge, snooze, resolve) over HTTP, for anything with a lifecycle
module: alerts (`alerts.lifecycle`) and incidents (`alerts.incident_lifecycle`). Browser forms
post to `/{things}/{id}/{action}` and are sent back to the page; API clients post JSON to
`/api/v1/{things}/{id}/{action}` and get the row's state. Actions need an admin key
(`VIGIL_ADMIN_KEYS`); a refused form action is answered with a page that names the key it needs
(dashboards/refused.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from sqlalchemy.orm import Session, sessionmaker

from alerts.lifecycle import LifecycleError
from dashboards.pages import RowId
from dashboards.refused import refused
from vigil.config import Settings

ACTIONS = ("acknowledge", "snooze", "resolve")
FORM_WORDS = {"acknowledge": "acknowledging", "snooze": "snoozing", "resolve": "resolving"}
MAX_BODY = 16_384


class Lifecycle(Protocol):
    """What a lifecycle module offers: each action takes the row's id, returns the row (raising
    LookupError for no such row, LifecycleError for an action its state does not allow)."""

    def acknowledge(
        self, session: Session, row_id: int, /, *, actor: str, now: datetime, note: str | None
    ) -> Any: ...

    def snooze(
        self,
        session: Session,
        row_id: int,
        /,
        *,
        actor: str,
        until: datetime,
        now: datetime,
        note: str | None,
    ) -> Any: ...

    def resolve(
        self,
        session: Session,
        row_id: int,
        /,
        *,
        actor: str,
        now: datetime,
        settings: Settings,
        note: str | None,
    ) -> Any: ...


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


def add_action_routes(
    router: APIRouter,
    *,
    noun: str,
    lifecycle: Lifecycle,
    settings: Settings,
    session_factory: sessionmaker[Session],
    viewer: Callable[..., Any],
) -> None:
    """The form and API action routes for `noun` (`alert`: `/alerts/{id}/{action}`, ...)."""
    things = f"{noun}s"

    def admin(principal: Any = Depends(viewer)) -> Any:
        if not getattr(principal, "admin", False):
            raise HTTPException(403, f"{noun} actions need an admin key (VIGIL_ADMIN_KEYS)")
        return principal

    def act(row_id: int, action: str, fields: dict[str, Any], actor: str) -> dict[str, Any]:
        if action not in ACTIONS:
            raise HTTPException(404, f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
        now = datetime.now(UTC)
        note = str(fields["note"]) if fields.get("note") not in (None, "") else None
        with session_factory() as session:
            try:
                if action == "acknowledge":
                    row = lifecycle.acknowledge(session, row_id, actor=actor, now=now, note=note)
                elif action == "snooze":
                    until = snooze_end(fields, now)
                    row = lifecycle.snooze(
                        session, row_id, actor=actor, until=until, now=now, note=note
                    )
                else:
                    row = lifecycle.resolve(
                        session, row_id, actor=actor, now=now, settings=settings, note=note
                    )
            except LookupError as exc:
                raise HTTPException(404, str(exc).strip("'\"")) from None
            except LifecycleError as exc:
                raise HTTPException(409, str(exc)) from None
            state = {
                "id": row.id,
                "status": row.status,
                "severity": row.severity,
                "acknowledged_by": row.acknowledged_by,
                "snoozed_until": row.snoozed_until.isoformat() if row.snoozed_until else None,
            }
            session.commit()
        return state

    @router.post(f"/{things}/{{row_id}}/{{action}}")
    async def form_action(
        row_id: RowId, action: str, request: Request, principal: Any = Depends(viewer)
    ) -> Response:
        """A browser's form: a refusal is a page that says why, not JSON."""
        what = f"{FORM_WORDS.get(action, action)} {noun} {row_id}"
        back = f"/{things}/{row_id}"
        if not getattr(principal, "admin", False):
            return refused(what, principal, back)
        try:
            act(row_id, action, await read_fields(request), principal.actor)
        except HTTPException as exc:
            return refused(what, principal, back, status=exc.status_code, why=str(exc.detail))
        return RedirectResponse(back, status_code=303)

    @router.post(f"/api/v1/{things}/{{row_id}}/{{action}}")
    async def api_action(
        row_id: RowId, action: str, request: Request, principal: Any = Depends(admin)
    ) -> JSONResponse:
        return JSONResponse(act(row_id, action, await read_fields(request), principal.actor))
