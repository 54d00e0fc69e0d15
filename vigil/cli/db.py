"""`vigil db upgrade|current`: the Alembic schema on VIGIL_DATABASE_URL."""

from __future__ import annotations

from storage.migrate import current_revision, head_revision, upgrade


def db_command(args) -> int:
    """`vigil db upgrade [--revision R]` and `vigil db current`, on VIGIL_DATABASE_URL."""
    from vigil.config import get_settings

    url = get_settings().database_url
    shown = _safe_url(url)
    if args.action == "upgrade":
        revision = upgrade(url, getattr(args, "revision", None) or "head")
        print(f"database {shown} is at revision {revision}")
        return 0
    if args.action == "current":
        revision = current_revision(url)
        head = head_revision()
        state = "up to date" if revision == head else f"behind head {head}: run `vigil db upgrade`"
        print(f"database {shown} is at revision {revision or '(none)'} ({state})")
        return 0
    raise ValueError(f"unknown db action {args.action!r}")


def _safe_url(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
