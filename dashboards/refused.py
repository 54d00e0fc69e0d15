"""The page a browser gets when a form action is refused: what was refused, why, which key it
needs and who the request came as — not a JSON error. API routes keep their JSON answers."""

from __future__ import annotations

from typing import Any

from fastapi.responses import HTMLResponse

from dashboards.templating import page

ADMIN_NEED = (
    "an admin key: one listed in VIGIL_ADMIN_KEYS. Give it a name (name:key) so that "
    "actions taken with it are recorded under that name"
)


def caller(principal: Any) -> str:
    """Who the request came as, in words: the key's name, else its id, and how it was presented."""
    name = getattr(principal, "name", None)
    via = {"session": "a page session of", "proxy": "the proxy user", "key": "the key"}.get(
        getattr(principal, "via", "key"), "the key"
    )
    who = f"{name}" if name else f"id {getattr(principal, 'key_id', '?')}"
    role = (
        "admin"
        if getattr(principal, "admin", False)
        else ("operator" if getattr(principal, "operator", False) else "viewer")
    )
    return f"{via} {who} ({role})"


def refused(
    what: str, principal: Any, back: str, *, status: int = 403, why: str | None = None
) -> HTMLResponse:
    """An HTML answer to a refused form action; `why` None: it needs an admin key."""
    return page(
        "refused.html",
        status=status,
        title=f"Not done: {what}",
        what=what,
        back=back,
        caller=caller(principal),
        why=why,
        need=None if why else ADMIN_NEED,
    )
