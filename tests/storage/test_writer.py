"""SampleWriter on SQLite and PostgreSQL: many threads, batching, validation, spill when the
queue is full, flush on close."""

from __future__ import annotations

import threading
import uuid

from sqlalchemy import select

from storage.db import session_scope
from storage.models import Sample
from storage.repositories import count_samples, fetch_window
from storage.writer import SampleWriter


def _ids(url: str) -> list[str]:
    with session_scope(url) as s:
        return list(s.scalars(select(Sample.id)))


def test_many_threads_batched_exactly_once(migrated_db, tmp_path):
    writer = SampleWriter(migrated_db, tmp_path / "j", batch_size=200, flush_interval_s=0.05)
    sent: list[list[str]] = [[] for _ in range(4)]

    def produce(k: int) -> None:
        for i in range(500):
            rid = str(uuid.uuid4())
            assert writer.submit({"id": rid, "prompt": f"t{k} {i}", "segment": f"s{k}"})
            sent[k].append(rid)

    threads = [threading.Thread(target=produce, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert writer.close(timeout=30)
    ids = _ids(migrated_db)
    assert len(ids) == 2000 and set(ids) == {r for part in sent for r in part}
    assert writer.written == 2000 and writer.journaled == 0 and writer.dropped == 0
    assert not writer.submit({"prompt": "late"})  # closed


def test_invalid_records_rejected_at_submit(migrated_db, tmp_path):
    writer = SampleWriter(migrated_db, tmp_path / "j", flush_interval_s=0.05)
    assert not writer.submit({"response": "no prompt"})
    assert not writer.submit({"prompt": "p", "ttft_ms": "slow"})
    assert "ttft_ms" in writer.last_error
    assert writer.submit({"prompt": "fine", "extra_field": [1, 2]})
    assert writer.close()
    assert writer.rejected == 2 and writer.written == 1
    with session_scope(migrated_db) as s:
        (rec,) = fetch_window(s, *_all_time())
        assert rec["extra_field"] == [1, 2] and rec["prompt"] == "fine"


def _all_time():
    from datetime import UTC, datetime

    return datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC)


def test_full_queue_spills_to_journal_then_all_written(migrated_db, tmp_path):
    # not started: nothing drains the queue, so the 11th record onward must spill
    writer = SampleWriter(
        migrated_db, tmp_path / "j", queue_size=10, flush_interval_s=0.05, start=False
    )
    ids = [str(uuid.uuid4()) for _ in range(30)]
    for i, rid in enumerate(ids):
        assert writer.submit({"id": rid, "prompt": f"p{i}"})
    assert writer.spilled == 20 and writer.journal.pending_records() == 20  # durable already
    writer.start()
    assert writer.flush(timeout=20)
    assert writer.close()
    assert sorted(_ids(migrated_db)) == sorted(ids)
    assert writer.written == 10 and writer.replayed == 20 and writer.dropped == 0


def test_close_flushes_pending_batch(migrated_db, tmp_path):
    writer = SampleWriter(migrated_db, tmp_path / "j", batch_size=10_000, flush_interval_s=5.0)
    for i in range(300):
        writer.submit({"prompt": f"p{i}"})
    assert writer.close(timeout=20)  # does not wait for the 5 s flush interval
    with session_scope(migrated_db) as s:
        assert count_samples(s) == 300


def test_record_refused_by_the_database_is_dead_lettered(migrated_db, tmp_path):
    writer = SampleWriter(migrated_db, tmp_path / "j", flush_interval_s=0.05, start=False)
    writer.submit({"id": "good-1", "prompt": "a"})
    writer.submit({"id": "bad", "prompt": "b"})
    writer.submit({"id": "good-2", "prompt": "c"})
    # sabotage one queued record after validation, as a DB-level refusal would look
    items = list(writer._queue.queue)
    items[1][1].row["finish_reason"] = "x" * 5000 if "postgresql" in migrated_db else None
    if "sqlite" in migrated_db:  # SQLite has no length limits: break NOT NULL instead
        items[1][1].row["sample_weight"] = None
    writer.start()
    assert writer.close()
    assert sorted(_ids(migrated_db)) == ["good-1", "good-2"]
    assert writer.dead_lettered == 1 and writer.dropped == 0
    dead = (tmp_path / "j" / "dead-letter.jsonl").read_text()
    assert '"bad"' in dead
    # the dead-letter file is kept for a person: a restarted writer does not replay or delete it
    again = SampleWriter(migrated_db, tmp_path / "j", flush_interval_s=0.05)
    assert again.close() and again.replayed == 0 and again.dead_lettered == 0
    assert (tmp_path / "j" / "dead-letter.jsonl").read_text() == dead


def test_from_settings_uses_the_writer_settings(migrated_db, tmp_path):
    from vigil.config import load_settings

    settings = load_settings(
        database_url=migrated_db, journal_dir=tmp_path / "jj", writer_batch_size=7,
        writer_flush_interval_s=0.02, writer_queue_size=9,
    )  # fmt: skip
    writer = SampleWriter.from_settings(settings)
    try:
        assert (writer.batch_size, writer.flush_interval_s) == (7, 0.02)
        assert writer._queue.maxsize == 9 and writer.journal.dir == tmp_path / "jj"
        for i in range(20):
            assert writer.submit({"prompt": f"p{i}"})
    finally:
        assert writer.close()
    assert writer.stats()["written"] + writer.stats()["replayed"] == 20
    with session_scope(migrated_db) as s:
        assert count_samples(s) == 20
