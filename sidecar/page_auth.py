"""Who may read the sidecar's pages (reports, alerts): they show webhook targets, receivers'
replies and prompt/response excerpts, so every one of them needs a caller.

Accepted, in order: `Authorization: Bearer <key>` (API use); the `vigil_session` cookie a browser
gets from `POST /login` (signed, HttpOnly, SameSite=Strict, Secure behind https, expiring, and
backed by a `page_sessions` row that `POST /logout` revokes); a user name in
`forward_auth_header` when the request comes from a trusted proxy. Pages are for readers
(global keys) and admins: tenant-bound keys are refused (403), the pages show every tenant's
alerts, and so are operator keys, which file traffic (gateways, importers, the sidecar's own
judge and canaries) and read nothing. A browser without credentials is sent to
the login page, an API client gets a 401.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.orm import Session
from starlette.exceptions import HTTPException

from vigil.asgi_guard import ANONYMOUS
from vigil.auth_throttle import AuthThrottle, retry_after_header
from vigil.authn import Authenticator, Refusal
from vigil.config import Settings
from vigil.keys import KeyRing, Principal, from_trusted_proxy

COOKIE = "vigil_session"


def _session_key(secret: str) -> bytes:
    return hmac.new(secret.encode(), b"vigil-page-session", hashlib.sha256).digest()


@dataclass(frozen=True)
class SessionClaim:
    """What a well-signed, unexpired cookie claims; the `page_sessions` row must still agree."""

    principal: Principal
    session_id: str


def sign_session(
    principal: Principal,
    secret: str,
    ttl_s: int,
    now: float | None = None,
    session_id: str | None = None,
) -> str:
    expires = int((now if now is not None else time.time()) + ttl_s)
    session_id = session_id or secrets.token_urlsafe(24)
    payload = (
        base64.urlsafe_b64encode(f"{session_id}|{principal.key_id}|{expires}".encode())
        .decode()
        .rstrip("=")
    )
    sig = hmac.new(_session_key(secret), payload.encode(), hashlib.sha256).hexdigest()
    return f"{payload}.{sig}"


def verify_session(
    token: str, secret: str, keyring: KeyRing, now: float | None = None
) -> SessionClaim | None:
    """The claim of a validly signed, unexpired cookie whose key is still configured (removing a
    key ends its sessions). Forgeries stop here, before the database is asked."""
    payload, _, sig = token.partition(".")
    want = hmac.new(_session_key(secret), payload.encode(), hashlib.sha256).hexdigest()
    # as bytes: a str holding non-ASCII (a forged cookie) would make compare_digest raise
    if not sig or not hmac.compare_digest(sig.encode(), want.encode()):
        return None
    try:
        session_id, key_id, expires = (
            base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).decode().split("|")
        )
        if int(expires) < (now if now is not None else time.time()):
            return None
    except ValueError:
        return None
    principal = keyring.by_id(key_id)
    if principal is None:
        return None
    return SessionClaim(dataclasses.replace(principal, via="session"), session_id)


def _not_a_reader(principal: Principal) -> str:
    if principal.tenant is not None:
        return "a tenant-bound key cannot read pages that show every tenant"
    return "an operator key files traffic; pages need a global or admin key"


def safe_next(target: str | None) -> str:
    """Only a path on this site: never an open redirect to another host."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/reports"
    return target


class PageAuth:
    def __init__(
        self,
        settings: Settings,
        keyring: KeyRing,
        throttle: AuthThrottle | None = None,
        session_factory: Callable[[], Session] | None = None,
    ) -> None:
        self.settings = settings
        self.keyring = keyring
        self.session_factory = session_factory  # page_sessions; None: no browser logins
        # the throttle is the API's too: one count per address, one answer once it is throttled
        self.auth = Authenticator(keyring, throttle, settings.trusted_proxies)

    def client(self, request: Request) -> str:
        return self.auth.client(
            request.client.host if request.client else None, request.headers.get("x-forwarded-for")
        )

    def principal(self, request: Request) -> Principal | None:
        if self.keyring.empty:
            return ANONYMOUS
        client = self.client(request)
        refused = self.auth.throttled(client)  # whatever credentials it brings
        if refused is not None:
            raise HTTPException(refused.status, refused.message, headers=refused.headers())
        header = request.headers.get("authorization")
        if header:
            found = self.auth.bearer(header, client)
            if isinstance(found, Refusal):
                raise HTTPException(found.status, found.message, headers=found.headers())
            return found
        claim = self._claim(request)
        if claim is not None and self._live(claim):
            return claim.principal
        name = self.settings.forward_auth_header
        if name and request.headers.get(name):
            peer = request.client.host if request.client else None
            if from_trusted_proxy(peer, self.settings.trusted_proxies):
                user = request.headers[name][:128]
                return Principal("proxy:" + user, via="proxy", name=user)
        return ANONYMOUS if self.keyring.empty else None

    def _claim(self, request: Request) -> SessionClaim | None:
        token = request.cookies.get(COOKIE)
        return verify_session(token, self.settings.secret_key, self.keyring) if token else None

    def _live(self, claim: SessionClaim) -> bool:
        if self.session_factory is None:
            return False
        from storage.repositories.page_sessions import live_key_id

        with self.session_factory() as session:
            return (
                live_key_id(session, claim.session_id, datetime.now(UTC)) == claim.principal.key_id
            )

    def require_viewer(self, request: Request) -> Principal:
        principal = self.principal(request)
        if principal is None:
            if "text/html" in request.headers.get("accept", ""):
                target = quote(request.url.path, safe="/")
                raise HTTPException(
                    303, "log in first", headers={"Location": f"/login?next={target}"}
                )
            raise HTTPException(
                401,
                "missing API key: send 'Authorization: Bearer <key>' or log in",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if principal is not ANONYMOUS and not principal.can_view_all:
            raise HTTPException(403, _not_a_reader(principal))
        request.state.principal = principal  # the connection is past a key check (http_server)
        return principal

    def router(self) -> APIRouter:
        from dashboards.pages import login_page

        router = APIRouter(include_in_schema=False)
        secure = self.settings.public_url.startswith("https://")

        @router.get("/login", response_class=HTMLResponse)
        def login_form(next: str | None = None) -> HTMLResponse:
            return login_page(safe_next(next), error=None)

        @router.post("/login", response_class=HTMLResponse)
        async def login(request: Request) -> Response:
            form = parse_qs((await request.body()).decode("utf-8", "replace"), max_num_fields=4)
            key = (form.get("key") or [""])[0].strip()
            wanted = form.get("next")
            target = safe_next(wanted[0] if wanted else None)
            found = self.auth.key(key, self.client(request))
            if isinstance(found, Refusal) and found.status == 429:
                refused = login_page(
                    target,
                    error="Too many failed attempts from this address; try again in "
                    f"{retry_after_header(found.retry_after)} seconds.",
                    status=429,
                )
                refused.headers.update(found.headers())
                return refused
            if isinstance(found, Refusal) or not found.can_view_all:
                return login_page(target, error="That key is not accepted here.", status=401)
            if self.session_factory is None:
                return login_page(
                    target, error="Logins are not available in this process.", status=503
                )
            from storage.repositories.page_sessions import open_session

            session_id = secrets.token_urlsafe(24)
            with self.session_factory() as session, session.begin():
                open_session(
                    session,
                    session_id,
                    found.key_id,
                    datetime.now(UTC),
                    self.settings.session_ttl_s,
                )
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(
                COOKIE,
                sign_session(
                    found,
                    self.settings.secret_key,
                    self.settings.session_ttl_s,
                    session_id=session_id,
                ),
                max_age=self.settings.session_ttl_s,
                httponly=True,
                samesite="strict",
                secure=secure,
                path="/",
            )
            return response

        @router.post("/logout")
        def logout(request: Request) -> Response:
            claim = self._claim(request)
            if claim is not None and self.session_factory is not None:
                from storage.repositories.page_sessions import revoke_session

                with self.session_factory() as session, session.begin():
                    revoke_session(
                        session, claim.session_id, datetime.now(UTC)
                    )  # the cookie dies here
            response = RedirectResponse("/login", status_code=303)
            response.delete_cookie(
                COOKIE, path="/", httponly=True, samesite="strict", secure=secure
            )
            return response

        return router
