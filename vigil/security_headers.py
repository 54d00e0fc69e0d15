"""`SecurityHeaders`: pure ASGI middleware adding browser hardening headers to every response.

`X-Content-Type-Options: nosniff` (a reply is never sniffed into HTML or script),
`Referrer-Policy: no-referrer` (links out of a page, e.g. to a webhook receiver, carry no page
address with ids in it), `X-Frame-Options: DENY`, and a Content-Security-Policy unless the
response set its own: pages load scripts and styles from this origin only and cannot be framed.
A drift report carries `REPORT_CSP`: no script at all, and it may frame only this origin (its
Evidently page). That page, a self-contained document of inline scripts, carries
`EVIDENTLY_CSP`: `sandbox allow-scripts` puts it in an opaque origin (no cookie, no storage, no
same-origin request to the sidecar) even when opened directly, and it may load nothing and send
nothing anywhere.
"""

from __future__ import annotations

from typing import TypedDict

from vigil.config import Settings

PAGE_CSP = (
    "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
REPORT_CSP = (
    "default-src 'none'; script-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "frame-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
EVIDENTLY_CSP = (
    "sandbox allow-scripts; default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; "
    "style-src 'unsafe-inline'; img-src data:; font-src data:; frame-ancestors 'self'; "
    "base-uri 'none'; form-action 'none'"
)

_ALWAYS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
)


class DocsUrls(TypedDict):
    """FastAPI's keyword arguments for its documentation routes (typed, so `**` checks)."""

    openapi_url: str | None
    docs_url: str | None
    redoc_url: str | None


def docs_urls(settings: Settings) -> DocsUrls:
    """FastAPI's documentation routes: none unless `api_docs`, and then the schema as plain JSON
    only (the Swagger and ReDoc pages load their scripts from a CDN)."""
    return {
        "openapi_url": "/openapi.json" if settings.api_docs else None,
        "docs_url": None,
        "redoc_url": None,
    }


class SecurityHeaders:
    def __init__(self, app, csp: str = PAGE_CSP) -> None:
        self.app = app
        self.csp = csp.encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [(k, v) for k, v in _ALWAYS if k not in present]
                if b"content-security-policy" not in present:
                    headers.append((b"content-security-policy", self.csp))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)
