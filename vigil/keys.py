"""API keys and who they speak for: a global key, a key bound to one tenant, an operator key or
an admin key.

Roles: a global key (`VIGIL_API_KEYS`) serves traffic, ingests and reads pages, but its own
traffic is logged as sent (no tenant/segment claims through `metadata`, no internal mark); a
tenant key (`VIGIL_TENANT_KEYS`) writes its one tenant only; an operator key
(`VIGIL_OPERATOR_KEYS`: gateways, importers, the sidecar's judge and canaries) may label traffic
for any tenant/segment, mark it internal and backfill old timestamps; an admin key
(`VIGIL_ADMIN_KEYS`) may do all an operator may, plus baseline and alert actions.

Any configured key may carry a name, `name:key` (name: 1-64 of `A-Z a-z 0-9 . _ -`): the name is
what actions taken with the key are recorded under. A key that itself holds a `:` after such a
prefix must therefore be given a name.

Both services resolve `Authorization: Bearer <key>` through the same `KeyRing`. Every presented
key is compared against every configured key in constant time, so timing does not tell which
key nearly matched.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

NAME_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


@dataclass(frozen=True)
class Principal:
    """The caller behind a key. `tenant` set: may only write that tenant's data."""

    key_id: str  # a short digest of the key, safe to log
    tenant: str | None = None
    admin: bool = False
    via: str = "key"  # "key", "session" or "proxy"
    operator: bool = False  # may label traffic for others, mark it internal, backfill
    name: str | None = None  # from `name:key`, or the user a trusted proxy forwarded

    @property
    def can_view_all(self) -> bool:
        """Pages show every tenant's alerts: global and admin keys read them; tenant-bound keys
        may not, nor operator keys, which file traffic and read nothing."""
        return self.admin or (self.tenant is None and not self.operator)

    @property
    def may_label_others(self) -> bool:
        """Operator and admin keys alone may set another tenant/segment, mark traffic internal
        or import samples with old timestamps."""
        return self.operator or self.admin

    @property
    def actor(self) -> str:
        """Who took an action, as recorded: `key:<name or key id>`, `session:...`,
        `proxy:<user>`."""
        return f"{self.via}:{self.name or self.key_id}"


def key_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def split_named(entry: str) -> tuple[str | None, str]:
    """`name:key` -> (name, key); an entry without a valid name prefix is a bare key."""
    name, sep, key = entry.partition(":")
    if sep and key and NAME_PATTERN.match(name):
        return name, key
    return None, entry


def bare_key(entry: str) -> str:
    """The secret of a configured entry, without its name."""
    return split_named(entry)[1]


class KeyRing:
    def __init__(
        self,
        api_keys: Iterable[str] = (),
        tenant_keys: dict[str, str] | None = None,
        admin_keys: Iterable[str] = (),
        operator_keys: Iterable[str] = (),
    ) -> None:
        entries: list[tuple[bytes, Principal]] = []

        def add(entry: str, **role) -> None:
            if entry:
                name, key = split_named(entry)
                entries.append((key.encode(), Principal(key_id(key), name=name, **role)))

        for entry in api_keys:
            add(entry)
        for entry, tenant in (tenant_keys or {}).items():
            add(entry, tenant=tenant)
        for entry in operator_keys:
            add(entry, operator=True)
        for entry in admin_keys:
            add(entry, admin=True)
        self._entries = entries

    @classmethod
    def from_settings(cls, settings) -> KeyRing:
        return cls(
            settings.api_keys,
            settings.tenant_keys,
            settings.admin_keys,
            getattr(settings, "operator_keys", ()),
        )

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


def internal_client_key(settings) -> str | None:
    """The key the sidecar calls the engine with (judge, canaries): an operator key, else an
    admin key (either may mark requests internal), else a global key (its mark is ignored, so
    those requests are logged as traffic)."""
    for entries in (settings.operator_keys, settings.admin_keys, settings.api_keys):
        for entry in entries:
            if entry:
                return bare_key(entry)
    return None
