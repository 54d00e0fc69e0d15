"""Request limits of the sidecar. The middleware itself is `vigil.asgi_guard.RequestGuard`, one
implementation for both services (key check before the body, byte limit while it streams)."""

from __future__ import annotations

from vigil.asgi_guard import BodyTooLarge, RequestGuard

PAGE_MAX_BYTES = 16 * 1024  # every route but ingest: a login form at most

__all__ = ["PAGE_MAX_BYTES", "BodyTooLarge", "RequestGuard", "body_limit"]


def body_limit(ingest_paths: str | tuple[str, ...], ingest_max_bytes: int):
    """Per-path byte limit: the ingest routes take batches, everything else tiny bodies."""
    paths = (ingest_paths,) if isinstance(ingest_paths, str) else ingest_paths

    def limit(path: str) -> int:
        return ingest_max_bytes if path.startswith(paths) else PAGE_MAX_BYTES

    return limit
