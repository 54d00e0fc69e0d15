"""Silences and "this was expected", over HTTP. `/silences` lists active and recent silences
with a form to add one (label matchers, hours, comment) and expire buttons;
`/api/v1/silences` (GET, POST) and `/api/v1/silences/{id}/expire` do the same as JSON.
`/incidents/{id}/expected` (form) and `/api/v1/incidents/{id}/expected` mark an incident
expected (alerts/expected.py). Changes need an admin key; a refused form is a page that says
which key it needs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from alerts import expected, silences
from alerts.lifecycle import LifecycleError
from dashboards.lifecycle_routes import read_fields
from dashboards.pages import RowId
from dashboards.refused import refused
from dashboards.templating import page
from storage.models import Silence
from storage.types import to_utc

RECENT = timedelta(days=7)


def silence_json(s: Silence, now: datetime) -> dict[str, Any]:
    active = to_utc(s.starts_at) <= now < to_utc(s.ends_at)
    return {"id": s.id, "matchers": s.matchers, "starts_at": to_utc(s.starts_at).isoformat(),
            "ends_at": to_utc(s.ends_at).isoformat(), "created_by": s.created_by,
            "comment": s.comment, "active": active}  # fmt: skip


def _ends(fields: dict[str, Any], now: datetime) -> datetime:
    if fields.get("ends_at"):
        try:
            ends = datetime.fromisoformat(str(fields["ends_at"]).replace("Z", "+00:00"))
        except ValueError:
            raise HTTPException(422, "ends_at: not an ISO 8601 time") from None
        return ends if ends.tzinfo else ends.replace(tzinfo=UTC)
    try:
        return now + timedelta(hours=float(fields.get("hours", "")))
    except (TypeError, ValueError, OverflowError):
        raise HTTPException(422, "a silence needs `ends_at` (ISO 8601) or `hours`") from None


Factory = sessionmaker[Session]


def _admin_of(viewer: Callable[..., Any]) -> Callable[..., Any]:
    def admin(principal: Any = Depends(viewer)) -> Any:
        if not getattr(principal, "admin", False):
            raise HTTPException(403, "silences and expected changes need an admin key")
        return principal

    return admin


def add_silence(session_factory: Factory, fields: dict[str, Any], actor: str) -> dict[str, Any]:
    now = datetime.now(UTC)
    raw = fields.get("matchers")
    if raw is None:  # a form: one field per label
        raw = {label: fields.get(label, "") for label in silences.LABELS}
    with session_factory() as session, session.begin():
        try:
            row = silences.create(session, matchers=raw, ends_at=_ends(fields, now),
                                  created_by=actor, comment=str(fields.get("comment") or ""),
                                  now=now)  # fmt: skip
        except silences.SilenceError as exc:
            raise HTTPException(422, str(exc)) from None
        return silence_json(row, now)


def expire_silence(session_factory: Factory, silence_id: int) -> dict[str, Any]:
    now = datetime.now(UTC)
    with session_factory() as session, session.begin():
        try:
            return silence_json(silences.expire(session, silence_id, now), now)
        except LookupError as exc:
            raise HTTPException(404, str(exc).strip("'\"")) from None


def mark_expected(
    session_factory: Factory, incident_id: int, fields: dict[str, Any], actor: str
) -> dict[str, Any]:
    note = str(fields["note"]) if fields.get("note") else None
    with session_factory() as session, session.begin():
        try:
            row = expected.mark_expected(session, incident_id, actor=actor,
                                         now=datetime.now(UTC), note=note)  # fmt: skip
        except LookupError as exc:
            raise HTTPException(404, str(exc).strip("'\"")) from None
        except LifecycleError as exc:
            raise HTTPException(409, str(exc)) from None
        at = row.expected_at  # mark_expected sets it
        return {"id": row.id, "status": row.status, "expected_by": row.expected_by,
                "expected_at": to_utc(at).isoformat() if at is not None else None}  # fmt: skip


def recent_silences(session_factory: Factory, *, newest_end_first: bool) -> list[dict[str, Any]]:
    """Silences active or ended within RECENT: the page's (by end, at most 200) or the API's."""
    now = datetime.now(UTC)
    query = select(Silence).where(Silence.ends_at > now - RECENT)
    if newest_end_first:
        query = query.order_by(Silence.ends_at.desc()).limit(200)
    else:
        query = query.order_by(Silence.id)
    with session_factory() as session:
        return [silence_json(s, now) for s in session.scalars(query)]


async def _form(
    request: Request,
    principal: Any,
    what: str,
    back: str,
    do: Callable[[dict[str, Any], str], Any],
) -> Response:
    """A form post: refused as a page without an admin key or on a refused change, else back."""
    if not getattr(principal, "admin", False):
        return refused(what, principal, back)
    try:
        do(await read_fields(request), principal.actor)
    except HTTPException as exc:
        return refused(what, principal, back, status=exc.status_code, why=str(exc.detail))
    return RedirectResponse(back, status_code=303)


def build_silence_router(session_factory: Factory, viewer: Callable[..., Any]) -> APIRouter:
    router = APIRouter()
    admin = _admin_of(viewer)

    def add(fields: dict[str, Any], actor: str) -> dict[str, Any]:
        return add_silence(session_factory, fields, actor)

    @router.get("/silences", response_class=HTMLResponse)
    def silences_page() -> HTMLResponse:
        shown = recent_silences(session_factory, newest_end_first=True)
        return page("silences.html", title="Silences", silences=shown, labels=silences.LABELS)

    @router.post("/silences")
    async def silence_form(request: Request, principal: Any = Depends(viewer)) -> Response:
        return await _form(request, principal, "adding a silence", "/silences", add)

    @router.post("/silences/{silence_id}/expire")
    async def expire_form(silence_id: RowId, principal: Any = Depends(viewer)) -> Response:
        if not getattr(principal, "admin", False):
            return refused(f"expiring silence {silence_id}", principal, "/silences")
        expire_silence(session_factory, silence_id)
        return RedirectResponse("/silences", status_code=303)

    @router.get("/api/v1/silences")
    def silences_api() -> dict[str, Any]:
        return {"silences": recent_silences(session_factory, newest_end_first=False)}

    @router.post("/api/v1/silences")
    async def silence_api(request: Request, principal: Any = Depends(admin)) -> JSONResponse:
        return JSONResponse(add(await read_fields(request), principal.actor), status_code=201)

    @router.post("/api/v1/silences/{silence_id}/expire")
    def expire_api(silence_id: RowId, principal: Any = Depends(admin)) -> dict[str, Any]:
        return expire_silence(session_factory, silence_id)

    @router.post("/incidents/{incident_id}/expected")
    async def expected_form(
        incident_id: RowId, request: Request, principal: Any = Depends(viewer)
    ) -> Response:
        def do(fields: dict[str, Any], actor: str) -> dict[str, Any]:
            return mark_expected(session_factory, incident_id, fields, actor)

        what = f"marking incident {incident_id} expected"
        return await _form(request, principal, what, f"/incidents/{incident_id}", do)

    @router.post("/api/v1/incidents/{incident_id}/expected")
    async def expected_api(
        incident_id: RowId, request: Request, principal: Any = Depends(admin)
    ) -> dict[str, Any]:
        return mark_expected(
            session_factory, incident_id, await read_fields(request), principal.actor
        )

    return router
