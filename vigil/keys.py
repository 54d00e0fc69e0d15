"""API keys and who they speak for: a global key, a key bound to one tenant, or an admin key.

Both services resolve `Authorization: Bearer <key>` through the same `KeyRing`. Every presented
key is compared against every configured key in constant time, so timing does not tell which
key nearly matched.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Principal:
    """The caller behind a key. `tenant` set: may only write that tenant's data."""

    key_id: str  # a short digest of the key, safe to log
    tenant: str | None = None
    admin: bool = False
    via: str = "key"  # "key", "session" or "proxy"

    @property
    def can_view_all(self) -> bool:
        """Pages show every tenant's alerts: tenant-bound keys may not read them."""
        return self.admin or self.tenant is None


def key_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:12]


class KeyRing:
    def __init__(self, api_keys: Iterable[str] = (), tenant_keys: dict[str, str] | None = None,
                 admin_keys: Iterable[str] = ()) -> None:
        entries: list[tuple[bytes, Principal]] = []
        for key in api_keys:
            if key:
                entries.append((key.encode(), Principal(key_id(key))))
        for key, tenant in (tenant_keys or {}).items():
            if key:
                entries.append((key.encode(), Principal(key_id(key), tenant=tenant)))
        for key in admin_keys:
            if key:
                entries.append((key.encode(), Principal(key_id(key), admin=True)))
        self._entries = entries

    @classmethod
    def from_settings(cls, settings) -> KeyRing:
        return cls(settings.api_keys, settings.tenant_keys, settings.admin_keys)

    @property
    def empty(self) -> bool:
        return not self._entries

    def by_id(self, wanted: str) -> Principal | None:
        return next((p for _, p in self._entries if p.key_id == wanted), None)

    def lookup(self, key: str | bytes) -> Principal | None:
        presented = key.encode() if isinstance(key, str) else key
        found: Principal | None = None
        for secret, principal in self._entries:  # no early exit: constant work per key
            if hmac.compare_digest(presented, secret) and found is None:
                found = principal
        return found

    def from_authorization(self, header: str | bytes | None) -> tuple[Principal | None, str]:
        """(principal, problem): problem is "" when found, else "missing" or "invalid"."""
        if isinstance(header, bytes):
            header = header.decode("latin-1")
        scheme, _, token = (header or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None, "missing"
        principal = self.lookup(token)
        return (principal, "") if principal is not None else (None, "invalid")


def from_trusted_proxy(client_host: str | None, proxies: list[str]) -> bool:
    """Whether the peer address is one of the configured proxies (IPs or CIDR networks)."""
    if not client_host or not proxies:
        return False
    try:
        address = ipaddress.ip_address(client_host)
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(p, strict=False) for p in proxies)
