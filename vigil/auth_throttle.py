"""Failed-authentication throttle, per client address, shared by both services' key checks and
the page login form. Only a wrong key counts; a request with none is told to send one.

Keys are at least 16 characters, but one may still be guessable; without a limit a client could
try keys as fast as the server answers. A client address that failed `max_failures` times in the
last `window_s` seconds is answered 429, with the seconds until its oldest failure leaves the
window, and its keys are not checked meanwhile (a guess must not be told apart from a refusal).
Addresses behind a trusted proxy are the right-most `X-Forwarded-For` hop the proxy added. The
table holds at most `max_clients` addresses (the least recently failing one goes first), so a
flood of addresses costs bounded memory; an address pushed out starts afresh.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable

from vigil.keys import from_trusted_proxy

WINDOW_S = 60.0
MAX_CLIENTS = 10_000


class AuthThrottle:
    def __init__(
        self,
        max_failures: int,
        window_s: float = WINDOW_S,
        max_clients: int = MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_failures < 1 or window_s <= 0 or max_clients < 1:
            raise ValueError("max_failures, window_s and max_clients must be positive")
        self.max_failures = max_failures
        self.window_s = window_s
        self.max_clients = max_clients
        self.clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def retry_after(self, client: str) -> float:
        """Seconds until `client` may try a key again; 0 when it may now."""
        times = self._failures.get(client)
        if times is None or len(times) < self.max_failures:
            return 0.0
        wait = times[0] + self.window_s - self.clock()
        return wait if wait > 0 else 0.0

    def failed(self, client: str) -> None:
        times = self._failures.pop(client, None)
        if times is None:
            times = deque(maxlen=self.max_failures)
        times.append(self.clock())
        self._failures[client] = times  # most recently failing last
        while len(self._failures) > self.max_clients:
            self._failures.popitem(last=False)

    def __len__(self) -> int:
        return len(self._failures)


def retry_after_header(seconds: float) -> str:
    return str(max(1, math.ceil(seconds)))


def client_address(
    peer: str | None, forwarded_for: str | None, trusted_proxies: Iterable[str]
) -> str:
    """The address a throttle counts: the peer, or behind a trusted proxy the hop it reports."""
    peer = peer or "unknown"
    if forwarded_for and from_trusted_proxy(peer, list(trusted_proxies)):
        hop = forwarded_for.rsplit(",", 1)[-1].strip()
        if hop:
            return hop[:64]
    return peer


def throttle_from_settings(settings) -> AuthThrottle | None:
    """One per process (several API server processes each count their own)."""
    limit = settings.auth_failures_per_minute
    return AuthThrottle(limit) if limit else None
