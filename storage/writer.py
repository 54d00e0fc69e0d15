"""SampleWriter: takes sample records from any thread without blocking and writes them to the
database in batches from one background thread; an outage never loses an acknowledged record.

- `submit(record)` validates, stamps `id` (UUID4) and `timestamp` if absent, and puts the
  record on a bounded queue. When the queue is full it spills the record straight to the
  journal (fsync'd before `submit` returns) instead of dropping it.
- The thread collects up to `batch_size` records or waits `flush_interval_s`, then commits them
  with one bulk `INSERT ... ON CONFLICT DO NOTHING`. On a database error the batch goes to the
  journal and the writer retries with exponential backoff; while the journal holds records,
  new batches go behind them in the journal, so replay keeps arrival order.
- Replay resends journal segments oldest first and deletes each only after its records are
  committed; a crash mid-replay just resends (ids make that idempotent). At start the writer
  replays any journal left by an earlier process.
- A record the database refuses for its content (IntegrityError/DataError) goes to
  `dead-letter.jsonl` in the journal dir with the error — kept for a person, not retried forever.

Counters for metrics: written, journaled, replayed, dead_lettered, rejected (invalid at
submit), dropped (only when even the journal cannot be written; should stay 0).
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from storage.batch_queue import BatchQueue
from storage.db import make_engine
from storage.journal import Journal
from storage.records import RecordError, format_timestamp, sample_from_record
from storage.sink import Item, SampleSink
from storage.types import utcnow
from vigil.record_redaction import RecordRedaction

log = logging.getLogger(__name__)


class SampleWriter:
    def __init__(
        self,
        database_url: str,
        journal_dir: str | Path,
        *,
        batch_size: int = 500,
        flush_interval_s: float = 0.5,
        queue_size: int = 100_000,
        source: str = "engine",
        retry_initial_s: float = 0.25,
        retry_max_s: float = 15.0,
        engine: Engine | None = None,
        start: bool = True,
        redaction: RecordRedaction | None = None,
    ):
        self.engine = engine or make_engine(database_url)
        self.journal = Journal(journal_dir)
        self.sink = SampleSink(self.engine, self.journal.dir / "dead-letter.jsonl", source)
        self.batch_size, self.flush_interval_s, self.source = batch_size, flush_interval_s, source
        self.retry_initial_s, self.retry_max_s = retry_initial_s, retry_max_s
        self.redaction = redaction  # the one redaction step, before the queue and the journal
        self._queue = BatchQueue(queue_size)
        self._lock = threading.Lock()  # counters touched by submitting threads
        self._stop = threading.Event()
        self._closed = False
        self._queued = 0  # records put on the queue
        self._handled = 0  # queued records the thread has written or journaled
        self.healthy = True
        self.last_error: str | None = None
        self._delay = retry_initial_s
        self._next_retry = 0.0
        self.written = self.journaled = self.replayed = 0
        self.rejected = self.dropped = self.spilled = 0
        self._thread = threading.Thread(target=self._run, name="vigil-sample-writer", daemon=True)
        if start:
            self.start()

    @classmethod
    def from_settings(cls, settings=None, **kwargs) -> SampleWriter:
        """A writer configured from `vigil.config` (database_url, journal_dir, writer_*)."""
        from vigil.config import get_settings

        s = settings or get_settings()
        return cls(
            s.database_url, s.journal_dir, batch_size=s.writer_batch_size,
            flush_interval_s=s.writer_flush_interval_s, queue_size=s.writer_queue_size,
            redaction=RecordRedaction.from_settings(s), **kwargs,
        )  # fmt: skip

    def start(self) -> None:
        self._thread.start()

    @property
    def dead_lettered(self) -> int:
        return self.sink.dead_lettered

    @property
    def queue_depth(self) -> int:
        return self._queue.qsize()

    def stats(self) -> dict[str, int | bool]:
        """The counters in one dict, for metrics endpoints."""
        return {
            "written": self.written, "journaled": self.journaled, "replayed": self.replayed,
            "spilled": self.spilled, "dead_lettered": self.dead_lettered,
            "rejected": self.rejected, "dropped": self.dropped,
            "queue_depth": self.queue_depth, "healthy": self.healthy,
            "journal_pending": self.journal.has_pending(),
        }  # fmt: skip

    # ---- any thread ---------------------------------------------------------------------

    def submit(self, record: dict[str, Any]) -> bool:
        """Accept one record; True once it is queued or durably journaled, False if it is
        invalid (counted in `rejected`, reason in `last_error`) or the writer is closed.
        Never waits on the database; only a full queue costs a journal fsync."""
        if self._closed:
            return False
        raw = self.redaction.record(record) if self.redaction else dict(record)
        raw.setdefault("id", None)
        try:
            if raw["id"] is None:
                raw["id"] = str(uuid.uuid4())
            if raw.get("timestamp") is None:  # stamp now, so a replay keeps the original time
                raw["timestamp"] = format_timestamp(utcnow())
            parsed = sample_from_record(raw, source=self.source)
        except RecordError as exc:
            with self._lock:
                self.rejected += 1
                self.last_error = f"rejected record: {exc}"
            return False
        try:
            with self._lock:  # same lock as close(): nothing lands on the queue after it
                if self._closed:
                    return False
                self._queue.put_nowait((raw, parsed))
                self._queued += 1
            return True
        except queue.Full:
            pass
        try:
            self.journal.append([raw])
        except (OSError, TypeError) as exc:
            log.error("sample writer: queue full and journal unwritable, record dropped: %s", exc)
            with self._lock:
                self.dropped += 1
            return False
        with self._lock:
            self.journaled += 1
            self.spilled += 1
        return True

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued record is written or journaled and, while the database is
        up, the journal is replayed. True if that happened within `timeout`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                drained = self._handled >= self._queued
            if drained and not (self.healthy and self.journal.has_pending()):
                return True
            time.sleep(0.01)
        return False

    def close(self, timeout: float = 10.0) -> bool:
        """Stop accepting, write (or journal) everything queued, replay the journal if the
        database is up, stop the thread. True if all of it finished within `timeout`; if the
        thread is stuck (a hanging database), what is still queued is journaled here."""
        with self._lock:
            self._closed = True
        self._stop.set()
        self._queue.wake()
        if self._thread.is_alive():
            self._thread.join(timeout)
        alive = self._thread.is_alive()
        leftover = self._queue.drain()  # only if the thread is stuck or never started
        self._journal(leftover)
        self.journal.close()
        if not alive:
            self.engine.dispose()
        return not alive and not leftover

    # ---- the writer thread --------------------------------------------------------------

    def _run(self) -> None:
        self._try_replay()
        while True:
            try:
                if self._step():
                    return
            except Exception:  # a bug must not silently kill the thread and strand the queue
                log.exception("sample writer: unexpected error; continuing")
                time.sleep(0.1)

    def _step(self) -> bool:
        """One batch and, when due, one replay; True once stopped and drained."""
        stopping = self._stop.is_set()
        batch = self._queue.collect(
            self.batch_size, self.flush_interval_s, wait=not stopping, stop=self._stop
        )
        if batch:
            try:
                if self.healthy and not self.journal.has_pending():
                    self._write(batch)
                else:  # keep arrival order: behind what the journal already holds
                    self._journal(batch)
            finally:
                with self._lock:
                    self._handled += len(batch)
        if self._retry_due(stopping):
            self._try_replay()
        if stopping and self._queue.empty():
            if self.healthy and self.journal.has_pending():
                self._try_replay()
            return True
        return False

    def _retry_due(self, stopping: bool) -> bool:
        if self.healthy:
            return self.journal.has_pending()
        # while down: retry on the backoff schedule, but never hold up a shutdown for it
        return not stopping and time.monotonic() >= self._next_retry

    def _write(self, batch: list[Item]) -> None:
        try:
            self.sink.store(batch)
        except Exception as exc:
            self._failed(exc)
            self._journal(batch)
            return
        self.written += len(batch)
        self._recovered()

    def _journal(self, batch: list[Item]) -> None:
        if not batch:
            return
        try:
            self.journal.append([raw for raw, _ in batch])
        except (OSError, TypeError) as exc:
            log.error("sample writer: journal unwritable, %d records dropped: %s", len(batch), exc)
            with self._lock:
                self.dropped += len(batch)
            return
        with self._lock:
            self.journaled += len(batch)

    def _replay_chunk(self, records: list[dict[str, Any]]) -> None:
        items = []
        for raw in records:
            if self.redaction:  # a journal an older writer left may hold unredacted records
                raw = self.redaction.record(raw)
            try:
                items.append((raw, sample_from_record(raw, source=self.source)))
            except RecordError as exc:
                self.sink.dead_letter(raw, exc)
        self.sink.store(items)
        self.replayed += len(items)

    def _try_replay(self) -> None:
        try:
            if not self.healthy:  # probe first: replay may find nothing it can take
                with self.engine.connect() as conn:
                    conn.execute(text("SELECT 1"))
            self.journal.replay(self._replay_chunk, self.batch_size)
        except Exception as exc:
            self._failed(exc)
            return
        self._recovered()

    def _failed(self, exc: BaseException) -> None:
        if self.healthy:
            log.warning("sample writer: database unavailable, journaling: %s", exc)
        self.healthy = False
        self.last_error = f"{type(exc).__name__}: {exc}"[:500]
        self._next_retry = time.monotonic() + self._delay * random.uniform(0.5, 1.0)
        self._delay = min(self._delay * 2, self.retry_max_s)

    def _recovered(self) -> None:
        if not self.healthy:
            log.info("sample writer: database back")
        self.healthy = True
        self._delay = self.retry_initial_s
