"""`DeliveryWorker`: a background thread that drains the webhook outbox.

It polls every `delivery_poll_interval_s`, drains back-to-back while full batches keep coming,
and can be woken at once (`wake()`, e.g. right after the drift job commits new alerts). A
database or network outage only makes a pass fail; the next pass retries — nothing is lost
because the outbox lives in the database.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from datetime import datetime

import httpx
from sqlalchemy.orm import Session

from alerts.delivery import DeliveryStats, deliver_due
from alerts.service import raise_condition
from storage.types import utcnow
from vigil.config import Settings, get_settings

log = logging.getLogger(__name__)

DEAD_LETTERS = "monitor_dead_letters"


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
    ) -> None:
        self.session_factory = session_factory
        self.settings = settings or get_settings()
        self._own_client = client is None
        self.client = client or httpx.Client(follow_redirects=False)
        self.batch_size = batch_size
        self.clock = clock
        self.rng = rng or random.Random()
        self.totals = DeliveryStats()
        self.last_error: str | None = None
        self._dead_letters_open: bool | None = None  # None: not known yet (check once)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> DeliveryWorker:
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("delivery worker already started")
        if self._own_client and self.client.is_closed:  # started again after stop()
            self.client = httpx.Client(follow_redirects=False)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="vigil-delivery", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float | None = 30.0) -> None:
        """Finish the row in flight, then return; closes the HTTP client it created."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("delivery worker did not stop within %s s", timeout)
        if self._own_client:
            self.client.close()

    def wake(self) -> None:
        self._wake.set()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def run_once(self) -> DeliveryStats:
        stats = deliver_due(
            self.session_factory,
            self.client,
            self.clock(),
            settings=self.settings,
            limit=self.batch_size,
            rng=self.rng,
        )
        for name in ("claimed", "delivered", "retried", "dead", "lost_claims"):
            setattr(self.totals, name, getattr(self.totals, name) + getattr(stats, name))
        self._report_dead_letters(stats)
        return stats

    def _report_dead_letters(self, stats: DeliveryStats) -> None:
        """Dead letters mean on-call missed a notification: a `monitor_dead_letters` alert,
        resolved by the next pass that delivers and buries nothing (the path works again)."""
        if stats.dead:
            healthy = False
        elif stats.delivered and self._dead_letters_open is not False:
            healthy = True  # resolve what this worker (or one before a restart) raised
        else:
            return  # an idle pass says nothing about the delivery path; nothing open to resolve
        try:
            with self.session_factory() as session:
                raise_condition(
                    session, DEAD_LETTERS, healthy=healthy, now=self.clock(), settings=self.settings,
                    summary=None if healthy else (
                        f"{stats.dead} alert notification(s) dead-lettered after "
                        f"{self.settings.delivery_max_attempts} attempts: on-call did not receive them"),
                    evidence={"dead": stats.dead, "dead_total": self.totals.dead,
                              "last_error": self.last_error},
                )  # fmt: skip
                session.commit()
            self._dead_letters_open = not healthy
        except Exception as exc:  # the outbox pass itself succeeded; try again next pass
            log.warning("could not report dead letters: %s: %s", type(exc).__name__, exc)

    def _run(self) -> None:
        while not self._stop.is_set():
            full = False
            try:
                stats = self.run_once()
                self.last_error = None
                full = stats.claimed >= self.batch_size
            except Exception as exc:  # e.g. the database is down: try again next poll
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("delivery pass failed: %s", self.last_error)
            if not full:
                self._wake.wait(self.settings.delivery_poll_interval_s)
                self._wake.clear()
