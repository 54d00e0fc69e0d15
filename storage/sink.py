"""The writer's database side: commit a batch of parsed records in one transaction; a record
the database refuses for its content goes to a dead-letter file instead of blocking the rest.

Errors are sorted in two kinds. "Poison" (IntegrityError, DataError, RecordError, TypeError,
ValueError) is about one record: the batch is retried row by row and the bad rows are
dead-lettered (`dead-letter.jsonl`, fsync'd, with the error) for a person to look at. Anything
else (connection refused or killed, timeouts, a schema not migrated yet, ...) is an outage:
`store` raises and the writer journals the batch and retries later.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import DataError, IntegrityError

from storage.db import session_factory
from storage.journal import encode
from storage.records import ParsedSample, RecordError
from storage.repositories.samples import insert_samples

log = logging.getLogger(__name__)

Item = tuple[dict[str, Any], ParsedSample]  # (the record as submitted, its parsed rows)


def is_poison(exc: BaseException) -> bool:
    """An error about one record's content (not worth retrying as is)."""
    return isinstance(exc, IntegrityError | DataError | RecordError | TypeError | ValueError)


class SampleSink:
    def __init__(self, engine: Engine, dead_letter_path: Path, source: str = "engine"):
        self._sessions = session_factory(engine)
        self.dead_letter_path = dead_letter_path
        self.source = source
        self.dead_lettered = 0
        self._lock = threading.Lock()

    def _insert(self, parsed: list[ParsedSample]) -> None:
        with self._sessions() as session, session.begin():
            insert_samples(session, parsed, source=self.source)

    def store(self, items: list[Item]) -> None:
        """Commit items (idempotent on id); poison rows are dead-lettered; an outage raises."""
        try:
            self._insert([p for _, p in items])
            return
        except Exception as exc:
            if not is_poison(exc):
                raise
        for raw, parsed in items:  # find the bad record(s) one by one
            try:
                self._insert([parsed])
            except Exception as exc:
                if not is_poison(exc):
                    raise
                self.dead_letter(raw, exc)

    def dead_letter(self, raw: dict[str, Any], exc: BaseException) -> None:
        entry = {"error": f"{type(exc).__name__}: {exc}"[:1000], "record": raw}
        with (
            self._lock,
            open(self.dead_letter_path, "ab", opener=lambda p, f: os.open(p, f, 0o600)) as fh,
        ):
            fh.write(encode([entry]))
            fh.flush()
            os.fsync(fh.fileno())
            self.dead_lettered += 1
        log.error("sample writer: record %s dead-lettered: %s", raw.get("id"), entry["error"])
