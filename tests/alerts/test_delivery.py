"""The outbox against a real HTTP receiver on 127.0.0.1 that verifies every signature, on SQLite
and PostgreSQL: outages, backoff, dead letters, lost responses, concurrent workers, crashes."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from alert_helpers import SECRET, Receiver, make_run, make_settings, proposal
from sqlalchemy import select

from alerts.delivery import DeliveryStats, deliver_due, list_dead_letters, outbox_counts, retry_dead
from alerts.rules_file import parse_rules
from alerts.service import raise_alerts
from alerts.worker import DeliveryWorker
from storage.models import Delivery


def enqueue(sessions, settings, n, now, **kw) -> list[str]:
    """n incidents → n deliveries per target; returns their idempotency keys. A condition rule
    per segment is an incident of its own (drift alerts would all join one drift incident)."""
    with sessions() as s, s.begin():
        for i in range(n):
            run_id = make_run(s, now + timedelta(seconds=i))
            raise_alerts(
                s,
                [proposal(rule="monitor_backlog", kind="monitoring", segment=f"tenant={i}")],
                run_id=run_id,
                now=now,
                settings=settings,
                **{"resolve_absent": False, **kw},
            )
    return [d.idempotency_key for d in rows(sessions)]


def rows(sessions) -> list[Delivery]:
    with sessions() as s:
        return list(s.scalars(select(Delivery).order_by(Delivery.id)))


def test_signed_delivery_reaches_the_receiver_once(sessions, settings, receiver, clock):
    (key,) = enqueue(sessions, settings, 1, clock())
    with httpx.Client() as client:
        assert deliver_due(sessions, client, clock(), settings=settings) == DeliveryStats(
            1, 1, 0, 0
        )
        assert deliver_due(sessions, client, clock(), settings=settings).claimed == 0
    got = receiver.processed[key]
    assert receiver.rejected == [] and receiver.hits[key] == 1
    assert got.payload["alert"]["url"].startswith("http://vigil.test:8001/alerts/")
    assert got.headers["X-Vigil-Signature"].startswith("v1=")
    # signed at the moment of the POST: the pass's `now` plus the (tiny) time spent so far
    assert 0 <= int(got.headers["X-Vigil-Timestamp"]) - int(clock().timestamp()) <= 2
    (row,) = rows(sessions)
    assert (row.status, row.attempts, row.delivered_at, row.last_error) == (
        "delivered",
        1,
        clock(),
        None,
    )


def test_tampered_and_replayed_requests_are_rejected_by_the_receiver(
    sessions, settings, receiver, clock
):
    (key,) = enqueue(sessions, settings, 1, clock())
    with httpx.Client() as client:
        deliver_due(sessions, client, clock(), settings=settings)
        captured = receiver.processed[key]
        tampered = captured.body.replace(b'"moderate"', b'"critical"')
        assert tampered != captured.body
        assert (
            client.post(receiver.url, content=tampered, headers=captured.headers).status_code == 401
        )
        clock.advance(301)  # a captured request replayed past the 300 s window
        assert (
            client.post(receiver.url, content=captured.body, headers=captured.headers).status_code
            == 401
        )
    assert "signature mismatch" in receiver.rejected[0]
    assert "outside the 300 s window" in receiver.rejected[1]
    assert receiver.hits[key] == 1  # neither reached the receiver's processing


def test_outage_then_recovery_delivers_each_key_exactly_once_with_growing_backoff(
    sessions, alerts_db, receiver, clock
):
    settings = make_settings(alerts_db, [receiver.url], delivery_max_attempts=6)
    receiver.stop()  # connections refused
    keys = enqueue(sessions, settings, 3, clock())
    delays: dict[int, list[float]] = {}
    with httpx.Client() as client:
        for attempt in (1, 2, 3):
            if attempt == 3:
                receiver.start()
                receiver.mode = "503"
            stats = deliver_due(sessions, client, clock(), settings=settings)
            assert (stats.claimed, stats.retried, stats.delivered) == (3, 3, 0)
            for row in rows(sessions):
                assert row.status == "pending" and row.attempts == attempt
                delays.setdefault(row.id, []).append(
                    (row.next_attempt_at - clock()).total_seconds()
                )
                expected_error = "HTTP 503" if attempt == 3 else "ConnectError"
                assert expected_error in row.last_error
            # nothing is due a second before the earliest retry time
            earliest = min(r.next_attempt_at for r in rows(sessions))
            assert (
                deliver_due(
                    sessions, client, earliest - timedelta(seconds=1), settings=settings
                ).claimed
                == 0
            )
            clock.now = max(r.next_attempt_at for r in rows(sessions))
        receiver.mode = "up"
        stats = deliver_due(sessions, client, clock(), settings=settings)
    assert (stats.claimed, stats.delivered) == (3, 3)
    assert all(r.status == "delivered" and r.attempts == 4 for r in rows(sessions))
    assert set(receiver.processed) == set(keys) and sum(receiver.duplicates.values()) == 0
    assert all(
        receiver.hits[k] == 2 for k in keys
    )  # one 503, one accepted; refused ones never arrived
    for series in delays.values():
        # after the n-th failure the delay lies in [d/2, d], d = base * 2**(n-1): strictly growing
        for n, delay in enumerate(series, start=1):
            ceiling = 10.0 * 2 ** (n - 1)
            assert ceiling / 2 <= delay <= ceiling
        assert series[0] < series[1] < series[2]
    assert len({tuple(s) for s in delays.values()}) == 3  # jitter: rows failing together spread out


def test_after_the_cap_a_delivery_is_dead_lettered_visible_and_retryable(
    sessions, alerts_db, receiver, clock
):
    settings = make_settings(
        alerts_db, [receiver.url], delivery_max_attempts=3, delivery_backoff_cap_s=15
    )
    receiver.mode = "503"
    (key,) = enqueue(sessions, settings, 1, clock())
    delays = []
    with httpx.Client() as client:
        for _ in range(3):
            assert deliver_due(sessions, client, clock(), settings=settings).claimed == 1
            (row,) = rows(sessions)
            if row.status == "pending":
                delays.append((row.next_attempt_at - clock()).total_seconds())
                clock.now = row.next_attempt_at
        assert row.status == "dead" and row.attempts == 3
        assert row.last_error.startswith("gave up after 3 attempts; last: attempt 3: HTTP 503")
        assert 5 <= delays[0] <= 10 and 7.5 <= delays[1] <= 15  # the second is capped at 15 s
        clock.advance(10**6)  # dead means dead: never picked up again
        assert deliver_due(sessions, client, clock(), settings=settings).claimed == 0
        with sessions() as s:
            assert [d.id for d in list_dead_letters(s)] == [row.id]
            assert outbox_counts(s) == {"dead": 1}
        with sessions() as s, s.begin():
            retry_dead(s, row.id, now=clock())
        receiver.mode = "up"
        assert deliver_due(sessions, client, clock(), settings=settings).delivered == 1
    assert receiver.hits[key] == 4 and key in receiver.processed
    with sessions() as s:
        assert list_dead_letters(s) == []
        with pytest.raises(ValueError, match=f"delivery {row.id} is delivered, not dead"):
            retry_dead(s, row.id)
        with pytest.raises(LookupError, match="delivery 987654 does not exist"):
            retry_dead(s, 987654)


def test_permanent_client_error_is_dead_at_once(sessions, settings, receiver, clock):
    receiver.mode = "400"
    enqueue(sessions, settings, 1, clock())
    with httpx.Client() as client:
        assert deliver_due(sessions, client, clock(), settings=settings).dead == 1
    (row,) = rows(sessions)
    assert row.status == "dead" and row.attempts == 1
    assert row.last_error.startswith("permanent client error, not retried: HTTP 400")


def test_retry_after_is_honoured_within_the_cap(sessions, settings, receiver, clock):
    receiver.mode, receiver.retry_after = "503", "500"
    enqueue(sessions, settings, 1, clock())
    with httpx.Client() as client:
        deliver_due(sessions, client, clock(), settings=settings)
    (row,) = rows(sessions)
    assert (row.next_attempt_at - clock()).total_seconds() == 500  # not the ~10 s backoff


def test_lost_response_is_retried_and_deduped_by_the_receiver(sessions, alerts_db, receiver, clock):
    """The receiver processes the request but its answer never arrives (client timeout): the
    worker retries (at-least-once); the idempotency key makes it exactly-once at the receiver."""
    settings = make_settings(alerts_db, [receiver.url], delivery_timeout_s=0.3)
    receiver.mode, receiver.slow_s = "slow", 1.0
    (key,) = enqueue(sessions, settings, 1, clock())
    with httpx.Client() as client:
        assert deliver_due(sessions, client, clock(), settings=settings).retried == 1
        assert "ReadTimeout" in rows(sessions)[0].last_error
        receiver.mode = "up"
        clock.now = rows(sessions)[0].next_attempt_at
        assert deliver_due(sessions, client, clock(), settings=settings).delivered == 1
    assert (
        receiver.hits[key] == 2
        and receiver.duplicates[key] == 1
        and list(receiver.processed) == [key]
    )


def test_concurrent_workers_never_send_a_delivery_twice(sessions, settings, receiver, clock):
    keys = enqueue(sessions, settings, 24, clock())
    barrier = threading.Barrier(3)
    totals: list[DeliveryStats] = []

    def worker() -> None:
        barrier.wait()
        with httpx.Client() as client:
            while (
                stats := deliver_due(sessions, client, clock(), settings=settings, limit=4)
            ).claimed:
                totals.append(stats)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sum(s.delivered for s in totals) == 24 and sum(s.claimed for s in totals) == 24
    assert max(s.claimed for s in totals) <= 4  # the batch limit holds
    assert sorted(receiver.hits) == sorted(keys) and set(receiver.hits.values()) == {1}


class Crash(BaseException):
    """The worker process dies mid-send (not an Exception: nothing catches it)."""


def test_a_worker_that_dies_mid_send_loses_nothing(sessions, settings, receiver, clock):
    (key,) = enqueue(sessions, settings, 1, clock())
    dying = httpx.Client(
        transport=httpx.MockTransport(lambda request: (_ for _ in ()).throw(Crash()))
    )
    with pytest.raises(Crash):
        deliver_due(sessions, dying, clock(), settings=settings)
    (row,) = rows(sessions)
    assert row.status == "pending" and row.attempts == 1 and row.next_attempt_at > clock()
    with httpx.Client() as client:
        # the claim's lease still holds: a second worker leaves it alone...
        assert deliver_due(sessions, client, clock(), settings=settings).claimed == 0
        # ...until the lease runs out, then it is sent
        clock.now = row.next_attempt_at
        assert deliver_due(sessions, client, clock(), settings=settings).delivered == 1
    assert key in receiver.processed and rows(sessions)[0].attempts == 2


def test_pagerduty_trigger_and_resolve_end_to_end(sessions, alerts_db, receiver, clock):
    settings = make_settings(alerts_db, [])
    rules = parse_rules(
        {"targets": {"pd": {"url": receiver.url, "format": "pagerduty", "routing_key": "R" * 32}},
         "routes": {"high": ["pd"]}},
        settings,
    )  # fmt: skip
    drift = proposal(rule="response_embedding_mmd", kind="model", severity="high")
    with sessions() as s, s.begin():
        raise_alerts(
            s, [drift], run_id=make_run(s, clock()), now=clock(), settings=settings, rules=rules
        )
    clock.advance(3600)
    with sessions() as s, s.begin():  # the next run: nothing fires -> resolved
        raise_alerts(
            s, [], run_id=make_run(s, clock()), now=clock(), settings=settings, rules=rules
        )
    with httpx.Client() as client:  # one pass each: the resolve waits for its trigger
        assert deliver_due(sessions, client, clock(), settings=settings).delivered == 1
        assert deliver_due(sessions, client, clock(), settings=settings).delivered == 1
    events = [r.payload for r in receiver.processed.values()]
    assert [e["event_action"] for e in events] == ["trigger", "resolve"]
    assert events[0]["dedup_key"] == events[1]["dedup_key"]
    assert events[0]["payload"]["severity"] == "error" and events[0]["routing_key"] == "R" * 32


def test_delivery_worker_thread_drains_the_outbox(sessions, alerts_db):
    real = Receiver(SECRET, lambda: datetime.now(UTC)).start()  # this one checks the wall clock
    try:
        settings = make_settings(alerts_db, [real.url], delivery_poll_interval_s=30)
        worker = DeliveryWorker(sessions, settings=settings).start()
        try:
            keys = enqueue(sessions, settings, 2, datetime.now(UTC))
            worker.wake()  # the poll interval is 30 s: only wake() can make this quick
            deadline = time.monotonic() + 10
            while len(real.processed) < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
        finally:
            worker.stop()
        assert not worker.running
        assert sorted(real.processed) == sorted(keys) and worker.totals.delivered == 2
        assert real.rejected == []
    finally:
        real.stop()


def test_resolve_never_overtakes_its_trigger(sessions, settings, receiver, clock):
    receiver.mode = "503"
    drift = proposal(rule="response_embedding_mmd", kind="model", severity="high")
    with sessions() as s, s.begin():
        raise_alerts(s, [drift], run_id=make_run(s, clock()), now=clock(), settings=settings)
    with httpx.Client() as client:
        assert deliver_due(sessions, client, clock(), settings=settings).retried == 1
        trigger_due = rows(sessions)[0].next_attempt_at
        with sessions() as s, s.begin():  # the rule stops firing while the trigger waits
            raise_alerts(s, [], run_id=None, now=clock(), settings=settings)
        receiver.mode = "up"
        # the resolve is due now, but its trigger is still pending: it waits its turn
        assert deliver_due(sessions, client, clock(), settings=settings).claimed == 0
        clock.now = trigger_due
        assert deliver_due(sessions, client, clock(), settings=settings).delivered == 1
        assert deliver_due(sessions, client, clock(), settings=settings).delivered == 1
    assert [r.payload["event"] for r in receiver.processed.values()] == ["trigger", "resolve"]
