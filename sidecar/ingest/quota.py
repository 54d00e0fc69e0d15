"""Per-tenant ingest quota: rows and bytes per minute, counted in a sliding minute per tenant (a
key without a tenant is counted as its own key). Past either quota a batch is refused whole with
a 429 and the seconds until enough of the minute has passed; nothing of it is stored or counted.

Bytes are what a batch stores: each record's JSON size (texts, vectors and unknown fields), so a
tenant cannot stay under its row quota while filling the disk with huge rows.

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
from typing import Any

WINDOW_S = 60.0
MAX_TENANTS = 10_000
ROWS, BYTES = "rows", "bytes"


class IngestQuota:
    def __init__(
        self,
        rows_per_minute: int,
        window_s: float = WINDOW_S,
        max_tenants: int = MAX_TENANTS,
        clock: Callable[[], float] = time.monotonic,
        bytes_per_minute: int = 0,
    ) -> None:
        self.limits = {ROWS: rows_per_minute, BYTES: bytes_per_minute}  # 0: no limit
        self.window_s = window_s
        self.max_tenants = max_tenants
        self.clock = clock
        # sender -> (time, rows, bytes) of each batch counted in the last window
        self._used: OrderedDict[str, deque[tuple[float, int, int]]] = OrderedDict()
        self._lock = threading.Lock()  # ingest runs in FastAPI's thread pool

    @property
    def limit(self) -> int:
        return self.limits[ROWS]

    def take(self, sender: str, rows: int) -> float:
        """Count `rows` for `sender` and return 0, or return the seconds to wait (nothing
        counted)."""
        return self.take_batch(sender, rows, 0)[0]

    def take_batch(self, sender: str, rows: int, nbytes: int) -> tuple[float, str | None]:
        """Count a batch of `rows` rows and `nbytes` bytes for `sender`: (0, None), or (the
        seconds to wait, "rows" or "bytes": the quota it would pass) with nothing counted."""
        now = self.clock()
        with self._lock:
            used = self._used.pop(sender, None) or deque()
            while used and used[0][0] <= now - self.window_s:
                used.popleft()
            waits = [
                (self._wait(used, column, amount, now), unit)
                for column, (unit, amount) in enumerate(((ROWS, rows), (BYTES, nbytes)), 1)
                if self.limits[unit] > 0
            ]
            wait, unit = max(waits, default=(0.0, None))
            if wait <= 0:
                used.append((now, rows, nbytes))
            self._used[sender] = used
            while len(self._used) > self.max_tenants:
                self._used.popitem(last=False)
            return (wait, unit) if wait > 0 else (0.0, None)

    def _wait(self, used: deque[Any], column: int, amount: int, now: float) -> float:
        limit = self.limits[ROWS if column == 1 else BYTES]
        total = sum(entry[column] for entry in used)
        if amount > limit:
            return self.window_s  # a batch larger than the quota never fits: say so
        if total + amount <= limit:
            return 0.0
        # the oldest entries leave the minute one by one: wait until enough have
        freed, needed = 0, total + amount - limit
        for entry in used:
            freed += entry[column]
            if freed >= needed:
                return max(float(entry[0]) + self.window_s - now, 1e-9)
        return self.window_s

    def wait_for_room(self, sender: str) -> float:
        """The seconds until `sender` may send one more row (0: now); nothing counted."""
        if self.limit <= 0:
            return 0.0
        now = self.clock()
        with self._lock:
            used = self._used.get(sender) or deque()
            inside = [(stamp, rows) for stamp, rows, _ in used if stamp > now - self.window_s]
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
            used.append((self.clock(), min(rows, self.limit), 0))
            self._used[sender] = used
            while len(self._used) > self.max_tenants:
                self._used.popitem(last=False)


def retry_after_seconds(wait: float) -> str:
    return str(max(1, math.ceil(wait)))
