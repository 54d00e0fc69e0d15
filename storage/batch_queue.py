"""The writer's bounded in-memory queue: any thread puts records on it without waiting, one
thread takes them off in batches, and `wake` ends that thread's wait at once (at shutdown)."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from typing import Any

from storage.sink import Item

_WAKE: Any = object()  # put on the queue by wake() to end a batch wait at once


class BatchQueue(queue.Queue[Item]):
    """A `queue.Queue` of (record, parsed rows) items that is taken off in batches."""

    def wake(self) -> None:
        """End the wait of a `collect` in progress (a full queue needs no waking)."""
        with contextlib.suppress(queue.Full):
            self.put_nowait(_WAKE)

    def drain(self) -> list[Item]:
        """Everything still queued, without waiting."""
        leftover: list[Item] = []
        while True:
            try:
                item = self.get_nowait()
            except queue.Empty:
                return leftover
            if item is not _WAKE:
                leftover.append(item)

    def collect(
        self, batch_size: int, flush_interval_s: float, wait: bool, stop: threading.Event
    ) -> list[Item]:
        """Up to batch_size items, waiting at most flush_interval_s (not at all unless `wait`);
        `wake` or a set `stop` ends the wait early."""
        batch: list[Item] = []
        deadline = time.monotonic() + flush_interval_s
        while len(batch) < batch_size:
            try:
                if batch or not wait:
                    item = self.get_nowait()
                else:
                    item = self.get(timeout=flush_interval_s)
            except queue.Empty:
                remaining = deadline - time.monotonic()
                if not batch or not wait or remaining <= 0 or stop.is_set():
                    break
                try:  # a short pause lets a trickle of records join this batch
                    item = self.get(timeout=min(remaining, 0.02))
                except queue.Empty:
                    continue
            if item is _WAKE:
                break
            batch.append(item)
        return batch
