"""Per-tenant ingest quota: rows per minute, counted in a sliding minute per tenant (a key
without a tenant is counted as its own key). Past the quota a batch is refused whole with a 429
and the seconds until enough of the minute has passed; nothing of it is stored.

Per sidecar process, in memory: a tenant that sends through N replicas gets N times the quota.
The table holds at most `max_tenants` senders (the least recent goes first), so many key ids or
tenants cost bounded memory.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

WINDOW_S = 60.0
MAX_TENANTS = 10_000


class IngestQuota:
    def __init__(
        self,
        rows_per_minute: int,
        window_s: float = WINDOW_S,
        max_tenants: int = MAX_TENANTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = rows_per_minute
        self.window_s = window_s
        self.max_tenants = max_tenants
        self.clock = clock
        self._used: OrderedDict[str, deque[tuple[float, int]]] = OrderedDict()
        self._lock = threading.Lock()  # ingest runs in FastAPI's thread pool

    def take(self, sender: str, rows: int) -> float:
        """Count `rows` for `sender` and return 0, or return the seconds to wait
        (nothing counted)."""
        if self.limit <= 0:
            return 0.0
        now = self.clock()
        with self._lock:
            used = self._used.pop(sender, None) or deque()
            while used and used[0][0] <= now - self.window_s:
                used.popleft()
            total = sum(n for _, n in used)
            wait = 0.0
            if rows > self.limit:
                wait = self.window_s  # a batch larger than the quota never fits: say so
            elif total + rows > self.limit:
                # the oldest entries leave the minute one by one: wait until enough have
                freed, needed = 0, total + rows - self.limit
                for stamp, n in used:
                    freed += n
                    if freed >= needed:
                        wait = stamp + self.window_s - now
                        break
            else:
                used.append((now, rows))
            self._used[sender] = used
            while len(self._used) > self.max_tenants:
                self._used.popitem(last=False)
            return wait

    def wait_for_room(self, sender: str) -> float:
        """The seconds until `sender` may send one more row (0: now); nothing counted."""
        if self.limit <= 0:
            return 0.0
        now = self.clock()
        with self._lock:
            used = self._used.get(sender) or deque()
            inside = [(stamp, n) for stamp, n in used if stamp > now - self.window_s]
            total = sum(n for _, n in inside)
            if total < self.limit:
                return 0.0
            freed = 0
            for stamp, n in inside:
                freed += n
                if total - freed < self.limit:
                    return stamp + self.window_s - now
            return self.window_s

    def charge(self, sender: str, rows: int) -> None:
        """Count work that was refused (a batch past a cap) against `sender`, up to one full
        quota, so a sender of oversized batches soon meets a 429 before its body is parsed."""
        if self.limit <= 0 or rows <= 0:
            return
        with self._lock:
            used = self._used.pop(sender, None) or deque()
            used.append((self.clock(), min(rows, self.limit)))
            self._used[sender] = used
            while len(self._used) > self.max_tenants:
                self._used.popitem(last=False)


def retry_after_seconds(wait: float) -> str:
    return str(max(1, math.ceil(wait)))
