"""Rendering for the dashboard pages (overview, drill-downs): one Jinja environment and the
response headers every page carries. Scripts and styles come only from this site (/static)."""

from __future__ import annotations

from pathlib import Path

from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from dashboards.report.render import fmt

TEMPLATES = Path(__file__).resolve().parent / "templates"
STATIC = Path(__file__).resolve().parent / "static"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "frame-ancestors 'none'; form-action 'self'")

_env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]))


def ago(seconds: float | None) -> str:
    """A short age: 42 s, 17 min, 5 h, 3 d."""
    if seconds is None:
        return "–"
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{max(seconds, 0):.0f} s"


def _register_filters() -> None:
    from dashboards.pages import redact_error, target_origin

    _env.filters.update(ago=ago, origin=target_origin, redact_error=redact_error)


_register_filters()


def page(template: str, status: int = 200, **context) -> HTMLResponse:
    headers = {"Cache-Control": "no-store", "X-Frame-Options": "DENY", "Content-Security-Policy": CSP,
               "X-Content-Type-Options": "nosniff"}
    return HTMLResponse(_env.get_template(template).render(fmt=fmt, **context), status_code=status,
                        headers=headers)
