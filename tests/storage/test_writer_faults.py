"""Outages on real PostgreSQL: the writer keeps accepting while the database is unreachable
(closed port, cut connections, a backend killed with pg_terminate_backend), journals, and once
the database is back every record is present exactly once."""

from __future__ import annotations

import time
import uuid

import psycopg
from sqlalchemy import event, func, select
from sqlalchemy.engine import make_url

from storage.db import session_scope
from storage.models import Sample
from storage.writer import SampleWriter


def _ids(url: str) -> list[str]:
    with session_scope(url) as s:
        return list(s.scalars(select(Sample.id)))


def _wait(predicate, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def _submit(writer: SampleWriter, n: int, tag: str) -> list[str]:
    ids = [str(uuid.uuid4()) for _ in range(n)]
    for i, rid in enumerate(ids):
        started = time.perf_counter()
        assert writer.submit({"id": rid, "prompt": f"{tag} {i}", "segment": tag})
        assert time.perf_counter() - started < 0.5  # never waits on the database
    return ids


def test_closed_port_then_cut_connections(pg_url, pg_proxy, tmp_path):
    writer = SampleWriter(
        pg_proxy.url_for(pg_url), tmp_path / "journal", batch_size=100, flush_interval_s=0.05,
        retry_initial_s=0.05, retry_max_s=0.3,
    )  # fmt: skip
    try:
        # 1. the port is closed: every record is accepted and journaled
        down = _submit(writer, 1500, "down")
        assert writer.flush(timeout=20)
        assert not writer.healthy and writer.journaled == 1500 and writer.written == 0
        assert writer.journal.pending_records() == 1500 and _ids(pg_url) == []

        # 2. the port opens: the journal is replayed, new records flow again
        pg_proxy.open()
        up = _submit(writer, 500, "up")
        assert _wait(lambda: writer.healthy and writer.flush(0.1)), writer.last_error
        assert writer.replayed >= 1500

        # 3. every connection is cut mid-stream and the port closes again, then reopens
        journaled_before = writer.journaled
        pg_proxy.close()
        cut = _submit(writer, 700, "cut")
        assert _wait(lambda: writer.journaled > journaled_before and not writer.healthy)
        time.sleep(0.2)
        pg_proxy.open()
        assert _wait(lambda: writer.flush(0.1) and len(_ids(pg_url)) == 2700), writer.last_error
    finally:
        assert writer.close(timeout=20)
    ids = _ids(pg_url)
    assert len(ids) == len(set(ids)) == 2700
    assert set(ids) == set(down) | set(up) | set(cut)
    assert writer.dropped == 0 and writer.dead_lettered == 0
    assert writer.written + writer.replayed >= 2700
    assert writer.journal.pending_records() == 0


def test_backend_killed_mid_batch(pg_url, pg_admin_url, tmp_path):
    writer = SampleWriter(
        pg_url, tmp_path / "journal", batch_size=200, flush_interval_s=0.05,
        retry_initial_s=0.05, retry_max_s=0.3, start=False,
    )  # fmt: skip
    admin_dsn = make_url(pg_admin_url).set(drivername="postgresql").render_as_string(False)
    killed: list[int] = []

    @event.listens_for(writer.engine, "before_cursor_execute")
    def kill_own_backend(conn, cursor, statement, *_):
        # the first INSERT into samples: terminate this very connection's server process, so
        # the statement runs on a dead connection in the middle of the writer's transaction
        if not killed and statement.lstrip().upper().startswith("INSERT INTO SAMPLES"):
            pid = conn.connection.dbapi_connection.info.backend_pid
            with psycopg.connect(admin_dsn, autocommit=True) as admin:
                assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]
            killed.append(pid)

    ids = _submit(writer, 600, "k")
    writer.start()
    try:
        assert _wait(lambda: writer.flush(0.1) and len(_ids(pg_url)) == 600), writer.last_error
    finally:
        assert writer.close(timeout=20)
    assert len(killed) == 1
    assert writer.journaled >= 1 and writer.replayed >= 1  # the failed batch went via the journal
    with session_scope(pg_url) as s:
        assert s.scalar(select(func.count()).select_from(Sample)) == 600
    assert set(_ids(pg_url)) == set(ids) and writer.dropped == 0
