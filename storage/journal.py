"""The writer's spill journal: JSON-lines segment files, fsync'd before a spill is acknowledged.

Layout: `<dir>/<time_ns>-<pid>-<seq>.jsonl`, replayed in name (= creation) order. A segment
being appended to is held under an exclusive `flock`, so several writer processes may share a
directory: replay skips segments another live process holds, and the kernel releases the lock
of a process that dies (SIGKILL included), so its segments are replayed by the next writer.

A line is acknowledged only after its whole batch is written and fsync'd; a crash mid-write
leaves at most a torn last line without its newline, which replay skips (it was never
acknowledged). A write that fails (disk full, I/O error) is cut back off the file and the
segment closed, so the next batch starts clean in a new segment and never shares a line with
the failed one. A segment is created under a hidden temporary name and renamed only once it is
locked: another process's replay can never see, take and delete it before its first write.
A complete line that does not parse (disk damage) is copied to `corrupt-<time>.txt` for a
person to look at, never silently dropped.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from storage.records import format_timestamp

MAX_SEGMENT_LINES = 50_000
TMP_PREFIX = ".tmp-"  # not matched by the segment glob: invisible to replay until renamed


def _json_default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, datetime):
        return format_timestamp(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def encode(records: list[dict[str, Any]]) -> bytes:
    return b"".join(
        json.dumps(r, separators=(",", ":"), default=_json_default).encode() + b"\n"
        for r in records
    )


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _private(path: str, flags: int) -> int:
    """open()'s opener for files holding prompts: readable by the owner only."""
    return os.open(path, flags, 0o600)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Journal:
    """Append batches durably; replay them in order into a sink; see the module doc."""

    def __init__(self, directory: str | Path):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._fd: int | None = None  # unbuffered: a failed write leaves nothing behind to flush
        self._path: Path | None = None
        self._lines = 0
        self._size = 0  # bytes acknowledged in the current segment
        self._seq = itertools.count()
        self._remove_stale_temporaries()
        self._pending: set[Path] = set(self._scan())  # leftovers from earlier runs
        self.torn = 0  # torn last lines skipped (crash mid-write, never acknowledged)
        self.corrupt = 0  # complete but unparseable lines, copied aside
        self.failed_writes = 0  # appends cut back after an OSError (the caller counts the records)

    def _scan(self) -> list[Path]:
        # segments only: names start with the creation time (dead-letter.jsonl etc. do not)
        return sorted(p for p in self.dir.glob("[0-9]*.jsonl") if p != self._path)

    def _remove_stale_temporaries(self) -> None:
        """A crash between create and rename leaves an empty temporary: drop those no live
        process holds (they never received a record)."""
        for path in self.dir.glob(TMP_PREFIX + "*"):
            with contextlib.suppress(OSError):
                fd = os.open(path, os.O_RDONLY)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    path.unlink(missing_ok=True)
                except BlockingIOError:
                    pass
                finally:
                    os.close(fd)

    def _open_segment(self) -> int:
        name = f"{time.time_ns():020d}-{os.getpid()}-{next(self._seq):06d}.jsonl"
        tmp, final = self.dir / (TMP_PREFIX + name), self.dir / name
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600
        )  # holds prompts: owner only
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.rename(tmp, final)  # visible to replay only now, already locked
            _fsync_dir(self.dir)  # the new file's name must survive a crash too
        except OSError:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            final.unlink(missing_ok=True)
            raise
        self._fd, self._path, self._lines, self._size = fd, final, 0, 0
        return fd

    def append(self, records: list[dict[str, Any]]) -> None:
        """Write records as JSON lines and fsync; returns only once they are durable.
        Raises OSError (disk full, unwritable dir) or TypeError (not JSON-serialisable); after
        an OSError nothing of the batch remains in the journal."""
        if not records:
            return
        data = encode(records)
        with self._lock:
            fd = self._fd if self._fd is not None else self._open_segment()
            try:
                _write_all(fd, data)
                os.fsync(fd)
            except OSError:
                self.failed_writes += 1
                self._abandon_segment(fd)
                raise
            self._size += len(data)
            self._lines += len(records)
            if self._lines >= MAX_SEGMENT_LINES:
                self.rotate()

    def _abandon_segment(self, fd: int) -> None:
        """Cut the failed write off (back to the last acknowledged byte) and close the segment,
        so whatever happened to its tail, the next batch starts in a fresh file."""
        try:
            os.ftruncate(fd, self._size)
            os.fsync(fd)
        except OSError:
            pass  # still closed below: a torn tail stays the last line, which replay skips
        self._close_segment()

    def _close_segment(self) -> None:
        """Close the open segment, if any (releasing its flock); it becomes replayable if it
        holds records and is deleted if not."""
        if self._fd is None or self._path is None:
            return
        os.close(self._fd)
        if self._lines:
            self._pending.add(self._path)
        else:
            self._path.unlink(missing_ok=True)
        self._fd, self._path, self._lines, self._size = None, None, 0, 0

    def rotate(self) -> None:
        """Close the current segment (it becomes replayable); the next append starts a new one."""
        with self._lock:
            self._close_segment()

    def has_pending(self) -> bool:
        """Whether this journal knows of records not yet replayed (its own or leftovers)."""
        with self._lock:
            return bool(self._pending) or self._lines > 0

    def pending_records(self) -> int:
        """Complete lines in all segment files now (for tests and metrics; reads the files)."""
        total = 0
        for path in self._scan() + ([self._path] if self._path else []):
            with contextlib.suppress(FileNotFoundError):
                total += path.read_bytes().count(b"\n")
        return total

    def replay(self, sink: Callable[[list[dict[str, Any]]], None], chunk_size: int = 500) -> None:
        """Feed every replayable segment, oldest first, to `sink` in chunks; delete a segment
        once all its chunks went through. If `sink` raises, the segment stays (a later replay
        resends it: the sink must be idempotent) and the exception propagates."""
        self.rotate()
        with self._lock:
            segments = sorted(set(self._scan()) | self._pending)
        for path in segments:
            try:
                fh = open(path, "rb")  # noqa: SIM115 - closed in finally
            except FileNotFoundError:
                self._pending.discard(path)
                continue
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a live writer appends to it, or another replays it
                if os.fstat(fh.fileno()).st_nlink == 0:
                    self._pending.discard(path)  # replayed and removed by someone else
                    continue
                records = self._parse(fh.read(), path)
                for start in range(0, len(records), chunk_size):
                    sink(records[start : start + chunk_size])
                path.unlink(missing_ok=True)
                _fsync_dir(self.dir)
                with self._lock:
                    self._pending.discard(path)
            finally:
                fh.close()

    def _parse(self, data: bytes, path: Path) -> list[dict[str, Any]]:
        lines = data.split(b"\n")
        if lines and lines[-1]:
            self.torn += 1  # no newline: a write cut short by a crash, never acknowledged
        records = []
        for line in lines[:-1]:
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise ValueError("not an object")
                records.append(record)
            except ValueError:
                self.corrupt += 1
                with open(self.dir / f"corrupt-{time.time_ns()}.txt", "ab", opener=_private) as out:
                    out.write(path.name.encode() + b": " + line + b"\n")
        return records

    def close(self) -> None:
        self.rotate()
