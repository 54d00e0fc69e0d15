"""`SameOriginActions`: pure ASGI middleware refusing cross-site state-changing requests.

The pages' actions (acknowledge, snooze, resolve, baseline build/validate/activate, login,
logout) are form POSTs that a browser authenticates with the session cookie. SameSite=Strict
keeps the cookie off cross-site requests in current browsers; this check does not rely on it.
A POST/PUT/PATCH/DELETE is refused (403) when the browser says it came from another site
(`Sec-Fetch-Site` other than `same-origin` or `none`), or when, without `Sec-Fetch-Site:
same-origin`, its `Origin` is neither this host nor `VIGIL_PUBLIC_URL`'s (a browser sends
`Origin: null` on a same-origin form post under the pages' `Referrer-Policy: no-referrer`).
A request with neither header (curl, an API client with a bearer key, which no other site can
send from a browser) passes. `/v1/` (ingest, bearer keys only) is left to the request guard.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SAME_SITE = frozenset({b"same-origin", b"none"})


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def cross_site(headers: dict[bytes, bytes], public_origin: str) -> str | None:
    """Why the request looks cross-site, or None."""
    site = headers.get(b"sec-fetch-site")
    if site is not None and site.lower() not in SAME_SITE:
        return f"Sec-Fetch-Site is {site.decode('latin-1')[:32]!r}"
    if site is not None and site.lower() == b"same-origin":
        # the browser vouches (no page can set Sec-Fetch-*); its Origin reads "null" on a form
        # post from a page served with Referrer-Policy: no-referrer, as every page here is
        return None
    origin = headers.get(b"origin")
    if origin is None:
        return None
    text = origin.decode("latin-1").strip().lower()
    host = headers.get(b"host", b"").decode("latin-1").strip().lower()
    if text == public_origin or (host and urlsplit(text).netloc == host):
        return None
    return f"Origin {text[:100]!r} is not this site"


class SameOriginActions:
    def __init__(self, app: ASGIApp, public_url: str, exempt: tuple[str, ...] = ("/v1/",)) -> None:
        self.app = app
        self.public_origin = _origin(public_url)
        self.exempt = exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] in UNSAFE
            and not scope["path"].startswith(self.exempt)
        ):
            why = cross_site(dict(scope.get("headers", [])), self.public_origin)
            if why is not None:
                body = json.dumps(
                    {
                        "detail": f"cross-site request refused ({why}): page actions must come "
                        "from this site's own pages"
                    }
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 403,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
