"""`RequestGuard`: pure ASGI middleware both services put in front of their apps.

In this order, before the app reads a byte of the body:
1. on protected paths, the `Authorization` header must name a known key (401 otherwise), and the
   caller's `Principal` is put in `scope["state"]["principal"]` for the handlers; an address
   with too many recent failures gets a 429 without its key being checked (`AuthThrottle`);
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

from vigil.auth_throttle import AuthThrottle, client_address, retry_after_header
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
        super().__init__(413, f"the body streamed more than {limit} bytes; the limit is {limit} bytes")


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
        self.throttle = throttle
        self.trusted_proxies = trusted_proxies
        self.protected = protected
        self.limit_for = max_bytes if callable(max_bytes) else (lambda _path, n=max_bytes: n)
        self.body_timeout_s = body_timeout_s
        self.render = render

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        if self.protected and path.startswith(self.protected):
            client = self._client(scope) if self.throttle is not None else None
            wait = self.throttle.retry_after(client) if client is not None else 0.0
            if wait:
                return await self._reject(
                    send, 429, f"too many failed key checks from this address; retry in "
                    f"{retry_after_header(wait)} s", "too_many_auth_failures", retry_after=wait)
            principal, problem = self._authenticate(scope)
            if principal is None:
                if client is not None and problem[2] == "invalid_api_key":  # a guess; no key is none
                    self.throttle.failed(client)
                return await self._reject(send, *problem)
            scope.setdefault("state", {})["principal"] = principal
        limit = self.limit_for(path)
        declared = _header(scope, b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                return await self._reject(send, 400, "Content-Length is not a number", "bad_length")
            if size > limit:
                return await self._reject(
                    send, 413, f"Content-Length {size} is too large; the limit is {limit} bytes", "body_too_large")
        await self._guarded(scope, receive, send, limit)

    def _authenticate(self, scope) -> tuple[Principal | None, tuple[int, str, str]]:
        if self.keyring is None or self.keyring.empty:
            return ANONYMOUS, (0, "", "")  # no keys configured (development only): open
        principal, problem = self.keyring.from_authorization(_header(scope, b"authorization"))
        if principal is not None:
            return principal, (0, "", "")
        if problem == "missing":
            return None, (401, "missing API key: send 'Authorization: Bearer <key>'", "missing_api_key")
        return None, (401, "invalid API key", "invalid_api_key")

    def _client(self, scope) -> str:
        peer = scope.get("client")
        forwarded = _header(scope, b"x-forwarded-for")
        return client_address(peer[0] if peer else None, forwarded.decode("latin-1") if forwarded else None,
                              self.trusted_proxies)

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
                await self._reject(send, exc.status_code, exc.detail, "body_too_large"
                                   if exc.status_code == 413 else "body_timeout")

    async def _reject(self, send, status: int, message: str, code: str, retry_after: float = 0.0) -> None:
        body = self.render(status, message, code)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                   (b"connection", b"close")]
        if status == 401:
            headers.append((b"www-authenticate", b"Bearer"))
        if retry_after:
            headers.append((b"retry-after", retry_after_header(retry_after).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
