"""`DeliveryWorker`: background threads that drain the webhook outbox, one target at a time each.

A dispatcher thread polls every `delivery_poll_interval_s` (or at once on `wake()`, e.g. right
after the drift job commits new alerts) for targets with something due, and hands each to a pool
of `delivery_parallel_targets` threads; a thread drains its target's due rows in order, back to
back while full batches keep coming. A target being drained is not handed out again, so a
receiver that stalls (each attempt is cut at `delivery_deadline_s`) delays only its own
notifications; every other target keeps its own thread. A database or network outage only makes
a pass fail; the next pass retries — nothing is lost because the outbox lives in the database.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from datetime import datetime

import httpx
from sqlalchemy.orm import Session

from alerts.deadline_http import deadline_client
from alerts.delivery import DeliveryStats, deliver_due, due_targets
from alerts.service import raise_condition
from storage.types import utcnow
from vigil.config import Settings, get_settings

log = logging.getLogger(__name__)

DEAD_LETTERS = "monitor_dead_letters"
STAT_FIELDS = ("claimed", "delivered", "retried", "dead", "lost_claims")


class DeliveryWorker:
    def __init__(
        self,
        session_factory: Callable[[], Session],
        *,
        settings: Settings | None = None,
        client: httpx.Client | None = None,
        batch_size: int = 50,
        clock: Callable[[], datetime] = utcnow,
        rng: random.Random | None = None,
        parallel_targets: int | None = None,
    ) -> None:
        self.session_factory = session_factory
        self.settings = settings or get_settings()
        self._own_client = client is None
        self.client = client or deadline_client()
        self.batch_size = batch_size
        self.parallel = parallel_targets or self.settings.delivery_parallel_targets
        self.clock = clock
        self.rng = rng or random.Random()
        self.totals = DeliveryStats()
        self.last_error: str | None = None
        self._dead_letters_open: bool | None = None  # None: not known yet (check once)
        self._dead_targets: set[str] = set()  # targets whose last pass buried a notification
        self._lock = threading.Lock()  # totals, busy targets, futures
        self._report_lock = threading.Lock()
        self._busy: set[str] = set()
        self._futures: set[Future] = set()
        self._pool: ThreadPoolExecutor | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> DeliveryWorker:
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("delivery worker already started")
        if self._own_client and self.client.is_closed:  # started again after stop()
            self.client = deadline_client()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="vigil-delivery", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float | None = 30.0) -> None:
        """Let the rows in flight finish (each within its deadline), then return; closes the HTTP
        client it created."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("delivery worker did not stop within %s s", timeout)
        with self._lock:
            futures = set(self._futures)
        _, late = wait(futures, timeout)
        if late:
            log.warning("%d webhook target(s) still sending after %s s", len(late), timeout)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        if self._own_client and not late:
            self.client.close()

    def wake(self) -> None:
        self._wake.set()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def run_once(self) -> DeliveryStats:
        """One pass over every target with something due, each on its own pool thread; waits
        for all of them and returns their sum."""
        targets = due_targets(self.session_factory, self.clock(), limit=1_000_000)
        stats = DeliveryStats()
        for future in [self._executor().submit(self._drain, t, once=True) for t in targets]:
            _add(stats, future.result())
        return stats

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                self.parallel, thread_name_prefix="vigil-delivery-target"
            )
        return self._pool

    def _dispatch(self) -> None:
        """Hand every idle target with something due to a free thread."""
        with self._lock:
            free, busy = self.parallel - len(self._busy), set(self._busy)
        if free <= 0:
            return
        for target in due_targets(self.session_factory, self.clock(), exclude=busy, limit=free):
            with self._lock:
                self._busy.add(target)
                future = self._executor().submit(self._drain, target)
                self._futures.add(future)
                future.add_done_callback(self._futures.discard)

    def _drain(self, target: str, once: bool = False) -> DeliveryStats:
        """Send `target`'s due rows, batch after batch while full ones keep coming."""
        total = DeliveryStats()
        try:
            while True:
                stats = deliver_due(
                    self.session_factory,
                    self.client,
                    self.clock(),
                    settings=self.settings,
                    limit=self.batch_size,
                    rng=self.rng,
                    target=target,
                )
                _add(total, stats)
                with self._lock:
                    _add(self.totals, stats)
                self._report_dead_letters(target, stats)
                if once or stats.claimed < self.batch_size or self._stop.is_set():
                    return total
        except Exception as exc:  # e.g. the database is down: the next dispatch retries
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("delivery pass for one target failed: %s", self.last_error)
            if once:
                raise
            return total
        finally:
            with self._lock:
                self._busy.discard(target)
            if total.claimed and not once:
                self._wake.set()  # a slot is free and rows moved: look again at once

    def _report_dead_letters(self, target: str, stats: DeliveryStats) -> None:
        """Dead letters mean on-call missed a notification: a `monitor_dead_letters` alert,
        resolved once every target that buried one delivers again and buries nothing."""
        with self._report_lock:
            if stats.dead:
                self._dead_targets.add(target)
                healthy = False
            elif stats.delivered and self._dead_letters_open is not False:
                self._dead_targets.discard(target)
                if self._dead_targets:
                    return  # another target is still burying notifications
                healthy = True  # resolve what this worker (or one before a restart) raised
            else:
                return  # an idle pass says nothing about the delivery path; nothing open to resolve
            try:
                with self.session_factory() as session:
                    raise_condition(
                        session, DEAD_LETTERS, healthy=healthy, now=self.clock(),
                        settings=self.settings,
                        summary=None if healthy else (
                            f"{stats.dead} alert notification(s) to one webhook target "
                            f"dead-lettered after {self.settings.delivery_max_attempts} "
                            "attempts: on-call did not receive them"),
                        evidence={"dead": stats.dead, "dead_total": self.totals.dead,
                                  "last_error": self.last_error},
                    )  # fmt: skip
                    session.commit()
                self._dead_letters_open = not healthy
            except Exception as exc:  # the outbox pass itself succeeded; try again next pass
                log.warning("could not report dead letters: %s: %s", type(exc).__name__, exc)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._dispatch()
                self.last_error = None
            except Exception as exc:  # e.g. the database is down: try again next poll
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("delivery dispatch failed: %s", self.last_error)
            self._wake.wait(self.settings.delivery_poll_interval_s)
            self._wake.clear()


def _add(total: DeliveryStats, stats: DeliveryStats) -> None:
    for name in STAT_FIELDS:
        setattr(total, name, getattr(total, name) + getattr(stats, name))
