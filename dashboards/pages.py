"""Read-only pages: `/reports` (drift runs), `/reports/{run_id}` (the HTML report),
`/alerts` (alerts and dead-letter deliveries); `/alerts/{id}` is in dashboards/alert_routes.py."""

from __future__ import annotations

import re
from pathlib import Path as FilePath
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, HTTPException, Path
from fastapi.responses import FileResponse, HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from dashboards.report.render import evidently_path, fmt
from storage.models import Alert, Delivery, DriftResult, DriftRun
from vigil.config import Settings
from vigil.security_headers import EVIDENTLY_CSP, REPORT_CSP

TEMPLATES = FilePath(__file__).resolve().parent / "templates"
RowId = Annotated[
    int, Path(ge=1, le=2**31 - 1)
]  # an INTEGER key the database can hold (else 404, not 500)
_env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]))
_URL = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")
MAX_ERROR_CHARS = 300  # a receiver's reply is shown as a hint, not in full


def target_origin(url: str | None) -> str:
    """scheme://host[:port] only: a webhook URL's path and query are often its secret (Slack)."""
    if not url:
        return ""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(unparseable URL)"
    return f"{parts.scheme}://{host}{port}" if parts.scheme and host else "(hidden)"


def redact_error(text: str | None) -> str:
    """An error text with every URL cut to its origin, and cut short."""
    if not text:
        return ""
    text = _URL.sub(lambda m: target_origin(m.group()) + "/…", text)
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + "…"


_env.filters["origin"] = target_origin
_env.filters["redact_error"] = redact_error


def _window(run: DriftRun) -> str:
    return f"{run.window_start:%Y-%m-%d %H:%M} → {run.window_end:%Y-%m-%d %H:%M}"


def _run_view(run: DriftRun, drifted: int = 0) -> dict[str, Any]:
    path = run.report_path
    has_report = bool(path and FilePath(path).is_file())
    return {"id": run.id, "window": _window(run), "status": run.status,
            "num_samples": run.num_samples, "drifted": drifted,
            "has_report": has_report}  # fmt: skip


def _page(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    headers = {
        "Cache-Control": "no-store",
        "X-Frame-Options": "DENY",
        "Content-Security-Policy": "default-src 'self'; style-src 'unsafe-inline'; "
        "frame-ancestors 'none'",
    }
    return HTMLResponse(
        _env.get_template(template).render(fmt=fmt, **context), status_code=status, headers=headers
    )


def login_page(next_path: str, error: str | None, status: int = 200) -> HTMLResponse:
    return _page("login.html", status=status, title="Log in", next=next_path, error=error)


def build_router(settings: Settings, session_factory: sessionmaker[Session]) -> APIRouter:
    router = APIRouter()

    @router.get("/reports", response_class=HTMLResponse)
    def reports() -> HTMLResponse:
        with session_factory() as session:
            runs = list(
                session.scalars(select(DriftRun).order_by(DriftRun.window_end.desc()).limit(200))
            )
            counts = (
                dict(
                    session.execute(
                        select(DriftResult.run_id, func.count())
                        .where(
                            DriftResult.drifted.is_(True),
                            DriftResult.run_id.in_([r.id for r in runs]),
                        )
                        .group_by(DriftResult.run_id)
                    ).all()
                )
                if runs
                else {}
            )
        return _page(
            "reports.html",
            title="Drift reports",
            runs=[_run_view(r, counts.get(r.id, 0)) for r in runs],
        )

    def report_file(run_id: int) -> FilePath:
        with session_factory() as session:
            run = session.get(DriftRun, run_id)
        if run is None:
            raise HTTPException(404, f"no drift run {run_id}")
        if not run.report_path or not FilePath(run.report_path).is_file():
            raise HTTPException(404, f"drift run {run_id} has no report (status {run.status})")
        return FilePath(run.report_path)

    @router.get("/reports/{run_id}", response_class=HTMLResponse)
    def report(run_id: RowId) -> FileResponse:
        return FileResponse(
            report_file(run_id),
            media_type="text/html",
            headers={"Content-Security-Policy": REPORT_CSP},
        )

    @router.get("/reports/{run_id}/evidently", response_class=HTMLResponse)
    def evidently(run_id: RowId) -> FileResponse:
        """The report's Evidently page, for its sandboxed frame (vigil.security_headers)."""
        path = evidently_path(report_file(run_id))
        if not path.is_file():
            raise HTTPException(404, f"drift run {run_id}'s report has no Evidently page")
        headers = {"Content-Security-Policy": EVIDENTLY_CSP, "X-Frame-Options": "SAMEORIGIN"}
        return FileResponse(path, media_type="text/html", headers=headers)

    @router.get("/alerts", response_class=HTMLResponse)
    def alerts() -> HTMLResponse:
        with session_factory() as session:
            rows = list(session.scalars(select(Alert).order_by(Alert.last_seen.desc()).limit(500)))
            dead = list(session.scalars(
                select(Delivery).where(Delivery.status == "dead")
                .order_by(Delivery.id.desc()).limit(500)
            ))  # fmt: skip
        return _page("alerts.html", title="Alerts", alerts=rows, dead=dead)

    return router
