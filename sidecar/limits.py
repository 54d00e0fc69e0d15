"""Request limits of the sidecar. The middleware itself is `vigil.asgi_guard.RequestGuard`, one
implementation for both services (key check before the body, byte limit while it streams)."""

from __future__ import annotations

from collections.abc import Callable

from vigil.asgi_guard import BodyTooLarge, RequestGuard

PAGE_MAX_BYTES = 16 * 1024  # every route but ingest: a login form at most
# Slack's button callbacks carry the message they came from (a few blocks of at most 3000 chars)
SLACK_MAX_BYTES = 64 * 1024
SLACK_PREFIX = "/slack/"

__all__ = ["PAGE_MAX_BYTES", "BodyTooLarge", "RequestGuard", "body_limit"]


def body_limit(ingest_paths: str | tuple[str, ...], ingest_max_bytes: int) -> Callable[[str], int]:
    """Per-path byte limit: the ingest routes take batches, everything else tiny bodies."""
    paths = (ingest_paths,) if isinstance(ingest_paths, str) else ingest_paths

    def limit(path: str) -> int:
        if path.startswith(paths):
            return ingest_max_bytes
        return SLACK_MAX_BYTES if path.startswith(SLACK_PREFIX) else PAGE_MAX_BYTES

    return limit
