"""Webhook deadlines against real receivers on 127.0.0.1, on SQLite and PostgreSQL: a receiver
that sends its reply headers a byte at a time is cut at `delivery_deadline_s`, and while it
stalls another target's alert is delivered on time."""

from __future__ import annotations

import random
import socket
import threading
import time
from datetime import UTC, datetime, timedelta

from alert_helpers import SECRET, Receiver, make_run, make_settings, proposal
from sqlalchemy import select

from alerts.attempt import Claimed, send_attempt
from alerts.deadline_http import deadline_client
from alerts.service import raise_alerts
from alerts.worker import DeliveryWorker
from storage.models import Delivery

DEADLINE_S = 1.5


class SlowHeaders:
    """Reads each request, then sends `HTTP/1.1 200 OK` one byte every `every_s` (each read is
    "on time", the reply never is)."""

    def __init__(self, every_s: float = 0.3, total_s: float = 12.0) -> None:
        self.every_s, self.total_s = every_s, total_s
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"
        self.requests = 0
        self.cut_after: list[float] = []  # seconds from the request to the client hanging up
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            self.requests += 1
            start = time.monotonic()
            for byte in b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" * 20:
                if time.monotonic() - start > self.total_s:
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    self.cut_after.append(time.monotonic() - start)
                    return
                time.sleep(self.every_s)

    def close(self) -> None:
        self.sock.close()


def test_slow_reply_headers_are_cut_at_the_deadline():
    """Was: each header byte arrived inside the 1 s read timeout, so the call lasted as long as
    the receiver dripped (150 s against a 30 s deadline in the audit)."""
    slow = SlowHeaders()
    try:
        settings = make_settings(
            "sqlite://", [slow.url], delivery_timeout_s=1.0, delivery_deadline_s=DEADLINE_S
        )
        row = Claimed(id=1, target=slow.url, idempotency_key="k1", payload={"a": 1}, attempts=1)
        with deadline_client() as client:
            start = time.monotonic()
            status, error, _ = send_attempt(
                client, row, now=datetime.now(UTC), settings=settings, rng=random.Random(0)
            )
            took = time.monotonic() - start
        assert status == "pending" and f"within {DEADLINE_S:g} s" in error
        assert DEADLINE_S - 0.05 <= took <= DEADLINE_S + 0.5
    finally:
        slow.close()


def _enqueue_one(sessions, settings, now) -> None:
    with sessions() as s, s.begin():
        raise_alerts(
            s,
            [proposal(segment="tenant=a")],
            run_id=make_run(s, now),
            now=now,
            settings=settings,
            resolve_absent=False,
        )


def test_a_stalled_receiver_delays_only_itself(sessions, alerts_db):
    """Was: one worker sent every row in turn, so the alert for the healthy target waited behind
    the slow one's whole attempt."""
    slow = SlowHeaders(total_s=8.0)
    healthy = Receiver(SECRET, lambda: datetime.now(UTC)).start()
    try:
        # the slow target first: its delivery row is the older one and is due first
        settings = make_settings(
            alerts_db,
            [slow.url, healthy.url],
            delivery_timeout_s=1.0,
            delivery_deadline_s=3.0,
            delivery_poll_interval_s=30,
        )
        _enqueue_one(sessions, settings, datetime.now(UTC) - timedelta(seconds=1))
        worker = DeliveryWorker(sessions, settings=settings).start()
        try:
            start = time.monotonic()
            while not healthy.processed and time.monotonic() - start < 10:
                time.sleep(0.02)
            on_time = time.monotonic() - start
            assert healthy.processed, "the healthy target never got its alert"
            # well inside the stalled attempt's 3 s deadline, which one shared worker would wait out
            assert on_time < 2.0, (
                f"the healthy target waited {on_time:.1f} s behind the stalled one"
            )
            # the stalled attempt runs beside it (its receiver thread may count the request
            # later than the healthy delivery lands when the machine is busy)
            while not slow.requests and time.monotonic() - start < 10:
                time.sleep(0.02)
            assert slow.requests == 1
            while not slow.cut_after and time.monotonic() - start < 10:
                time.sleep(0.02)
            assert slow.cut_after and slow.cut_after[0] <= 3.0 + 1.0  # and cut at its deadline
        finally:
            worker.stop()
        with sessions() as s:
            by_target = {d.target: d for d in s.scalars(select(Delivery))}
        assert by_target[healthy.url].status == "delivered"
        assert (
            by_target[slow.url].status == "pending"
            and "within 3 s" in by_target[slow.url].last_error
        )
        assert worker.totals.delivered == 1 and worker.totals.retried == 1
    finally:
        slow.close()
        healthy.stop()
