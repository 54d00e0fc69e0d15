"""`RequestGuard`: pure ASGI middleware both services put in front of their apps.

In this order, before the app reads a byte of the body:
1. on protected paths, the `Authorization` header must name a known key (401 otherwise), and the
   caller's `Principal` is put in `scope["state"]["principal"]` for the handlers; an address
   with too many recent failures gets a 429 without its key being checked (`vigil/authn.py`,
   the same check the sidecar's pages and login run);
2. a declared `Content-Length` above the limit is a 413 at once;
3. the body is counted as it streams (chunked uploads, lying lengths) and must arrive within a
   deadline, so a slowly trickled body cannot hold a connection forever (408).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

from starlette.exceptions import HTTPException

from vigil.auth_throttle import AuthThrottle, retry_after_header
from vigil.authn import Authenticator, Refusal
from vigil.keys import KeyRing, Principal

# no keys configured (development only): no roles to tell apart, so the caller may do what an
# operator may
ANONYMOUS = Principal("anonymous", operator=True)

# (status, message, code) -> JSON body; each service answers in its own error shape
ErrorRenderer = Callable[[int, str, str], bytes]


def detail_json(status: int, message: str, code: str) -> bytes:
    return json.dumps({"detail": message, "code": code}).encode()


class BodyTooLarge(HTTPException):
    """An HTTPException so FastAPI's body parsing surfaces it as a 413 (not a generic 400)."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            413, f"the body streamed more than {limit} bytes; the limit is {limit} bytes"
        )


class BodyTooSlow(HTTPException):
    def __init__(self, timeout_s: float) -> None:
        super().__init__(408, f"the body did not arrive within {timeout_s:g} s")


def _header(scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value
    return None


class RequestGuard:
    def __init__(
        self,
        app,
        *,
        keyring: KeyRing | None,
        protected: tuple[str, ...] = (),
        max_bytes: int | Callable[[str], int],
        body_timeout_s: float = 30.0,
        render: ErrorRenderer = detail_json,
        throttle: AuthThrottle | None = None,
        trusted_proxies: tuple[str, ...] = (),
    ) -> None:
        self.app = app
        self.keyring = keyring
        self.auth = Authenticator(keyring or KeyRing(), throttle, trusted_proxies)
        self.protected = protected
        self.limit_for = max_bytes if callable(max_bytes) else (lambda _path, n=max_bytes: n)
        self.body_timeout_s = body_timeout_s
        self.render = render

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        if self.protected and path.startswith(self.protected):
            found = self._authenticate(scope)
            if isinstance(found, Refusal):
                return await self._reject(
                    send, found.status, found.message, found.code, retry_after=found.retry_after
                )
            scope.setdefault("state", {})["principal"] = found
        limit = self.limit_for(path)
        declared = _header(scope, b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                return await self._reject(send, 400, "Content-Length is not a number", "bad_length")
            if size > limit:
                return await self._reject(
                    send,
                    413,
                    f"Content-Length {size} is too large; the limit is {limit} bytes",
                    "body_too_large",
                )
        await self._guarded(scope, receive, send, limit)

    def _authenticate(self, scope) -> Principal | Refusal:
        if self.keyring is None or self.keyring.empty:
            return ANONYMOUS  # no keys configured (development only): open
        peer = scope.get("client")
        forwarded = _header(scope, b"x-forwarded-for")
        client = self.auth.client(
            peer[0] if peer else None, forwarded.decode("latin-1") if forwarded else None
        )
        return self.auth.bearer(_header(scope, b"authorization"), client)

    async def _guarded(self, scope, receive, send, limit: int) -> None:
        seen = 0
        deadline: float | None = None
        body_done = False
        started = False

        async def counting_receive():
            nonlocal seen, deadline, body_done
            if body_done:  # later calls only watch for a disconnect: no deadline
                return await receive()
            if deadline is None:
                deadline = time.monotonic() + self.body_timeout_s
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BodyTooSlow(self.body_timeout_s)
            try:
                message = await asyncio.wait_for(receive(), remaining)
            except TimeoutError:
                raise BodyTooSlow(self.body_timeout_s) from None
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(limit)
                body_done = not message.get("more_body", False)
            else:
                body_done = True
            return message

        async def tracking_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except (BodyTooLarge, BodyTooSlow) as exc:
            if not started:
                await self._reject(
                    send,
                    exc.status_code,
                    exc.detail,
                    "body_too_large" if exc.status_code == 413 else "body_timeout",
                )

    async def _reject(
        self, send, status: int, message: str, code: str, retry_after: float = 0.0
    ) -> None:
        body = self.render(status, message, code)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        if status == 401:
            headers.append((b"www-authenticate", b"Bearer"))
        if retry_after:
            headers.append((b"retry-after", retry_after_header(retry_after).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
