"""Rendering for the dashboard pages (overview, drill-downs): one Jinja environment and the
response headers every page carries. Scripts and styles come only from this site (/static)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from dashboards.report.render import fmt

TEMPLATES = Path(__file__).resolve().parent / "templates"
STATIC = Path(__file__).resolve().parent / "static"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; "
    "frame-ancestors 'none'; form-action 'self'"
)

_env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]))
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # C0, DEL and C1: Unicode's control characters


def ago(seconds: float | None) -> str:
    """A short age: 42 s, 17 min, 5 h, 3 d."""
    if seconds is None:
        return "–"
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{max(seconds, 0):.0f} s"


def visible(name: str | None) -> str:
    """A stored tenant, segment or label for display: control characters as `\\xNN` (a tab as
    `\\x09`), so none is invisible or breaks a line; HTML escaping is still the template's."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", name or "")


def _register_filters() -> None:
    from dashboards.pages import redact_error, target_origin

    _env.filters.update(ago=ago, origin=target_origin, redact_error=redact_error, visible=visible)


_register_filters()


def page(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    headers = {
        "Cache-Control": "no-store",
        "X-Frame-Options": "DENY",
        "Content-Security-Policy": CSP,
        "X-Content-Type-Options": "nosniff",
    }
    return HTMLResponse(
        _env.get_template(template).render(fmt=fmt, **context), status_code=status, headers=headers
    )
