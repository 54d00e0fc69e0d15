"""The one key check both services run, wherever a key is presented: the engine API and ingest
(`vigil/asgi_guard.py`), the sidecar's pages, chart API and `/metrics` (`sidecar/page_auth.py`)
and the login form. It counts wrong keys per client address in the process's one `AuthThrottle`,
and once an address is throttled every check from it is a 429, the right key included: a
throttled client learns nothing about the keys it tries, wherever it tries them.

The client address is the peer, or behind a trusted proxy the hop that proxy reports in
`X-Forwarded-For` (from any other peer the header is ignored: a client rotating it is still one
client).
"""

from __future__ import annotations

from dataclasses import dataclass

from vigil.auth_throttle import AuthThrottle, client_address, retry_after_header
from vigil.keys import KeyRing, Principal


@dataclass(frozen=True)
class Refusal:
    status: int  # 401 or 429
    message: str
    code: str
    retry_after: float = 0.0

    def headers(self) -> dict[str, str]:
        if self.status == 429:
            return {"Retry-After": retry_after_header(self.retry_after)}
        return {"WWW-Authenticate": "Bearer"}


MISSING = Refusal(401, "missing API key: send 'Authorization: Bearer <key>'", "missing_api_key")
INVALID = Refusal(401, "invalid API key", "invalid_api_key")


class Authenticator:
    def __init__(self, keyring: KeyRing, throttle: AuthThrottle | None, trusted_proxies=()) -> None:
        self.keyring = keyring
        self.throttle = throttle
        self.trusted_proxies = tuple(trusted_proxies)

    def client(self, peer: str | None, forwarded_for: str | None) -> str:
        return client_address(peer, forwarded_for, self.trusted_proxies)

    def throttled(self, client: str) -> Refusal | None:
        """The 429 for an address past its failures, before any key of it is looked at."""
        wait = self.throttle.retry_after(client) if self.throttle is not None else 0.0
        if not wait:
            return None
        return Refusal(
            429,
            f"too many failed key checks from this address; retry in {retry_after_header(wait)} s",
            "too_many_auth_failures",
            wait,
        )

    def failed(self, client: str) -> None:
        if self.throttle is not None:
            self.throttle.failed(client)

    def bearer(self, header: str | bytes | None, client: str) -> Principal | Refusal:
        """The caller behind an `Authorization` header, or why not (a wrong key is counted)."""
        refused = self.throttled(client)
        if refused is not None:
            return refused
        principal, problem = self.keyring.from_authorization(header)
        if principal is not None:
            return principal
        if problem == "missing":
            return MISSING  # no key is not a guess
        self.failed(client)
        return INVALID

    def key(self, key: str, client: str) -> Principal | Refusal:
        """A key typed into the login form (a wrong one is counted)."""
        refused = self.throttled(client)
        if refused is not None:
            return refused
        principal = self.keyring.lookup(key) if key else None
        if principal is None:
            if key:
                self.failed(client)
            return INVALID
        return principal
