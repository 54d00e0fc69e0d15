"""The spill journal on a full filesystem (a 64 KiB tmpfs): a failed write is cut back and the
segment closed, so nothing acknowledged is lost or merged into a torn line; a new segment is
invisible to other processes' replay until it is locked."""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
from pathlib import Path

import pytest

from storage.journal import TMP_PREFIX, Journal


@pytest.fixture
def small_fs(tmp_path):
    mount = tmp_path / "fs"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _batch(start: int, n: int = 5) -> list[dict]:
    return [{"id": f"r{start + i}", "prompt": "p" * 700} for i in range(n)]


def test_full_disk_loses_nothing_acknowledged(small_fs: Path):
    """Was: a failed batch's bytes stayed in the file buffer; closing the segment on the full
    disk (replay, shutdown) raised and left a closed file behind, so the next batch failed with
    a ValueError nobody counted; and a batch reported as failed (counted dropped) could still
    reach the disk later and be replayed."""
    ballast = small_fs / "ballast.bin"
    ballast.write_bytes(b"\0" * 24 * 1024)  # freed later, as an operator clearing space would
    journal = Journal(small_fs / "journal")
    acknowledged: list[str] = []
    failures = 0
    start = 0
    while failures < 3 and start < 1000:  # fill the disk, then keep trying
        batch = _batch(start)
        start += len(batch)
        try:
            journal.append(batch)
            acknowledged += [r["id"] for r in batch]
        except OSError:
            failures += 1
    assert failures == 3 and acknowledged
    with contextlib.suppress(OSError):
        journal.rotate()  # replay and shutdown close the segment while the disk is still full
    ballast.unlink()
    for _ in range(2):  # space again: these must land intact
        batch = _batch(start)
        start += len(batch)
        journal.append(batch)
        acknowledged += [r["id"] for r in batch]
    replayed: list[str] = []
    journal.replay(lambda chunk: replayed.extend(r["id"] for r in chunk))
    assert journal.corrupt == 0 and not list((small_fs / "journal").glob("corrupt-*"))
    assert sorted(replayed) == sorted(acknowledged)  # all acknowledged, nothing reported as failed
    assert journal.failed_writes == 3


def test_new_segment_is_locked_before_replay_can_see_it(tmp_path, monkeypatch):
    """Was: the segment got its name first and its lock after, so another process's replay
    could lock, read (empty) and delete it in between; its later lines were lost."""
    journal = Journal(tmp_path)
    seen_unlocked: list[str] = []
    real_flock = fcntl.flock

    def spy(fd, op):  # at the moment the writer locks, look at what replay could find
        for path in tmp_path.glob("[0-9]*.jsonl"):
            with contextlib.suppress(OSError), open(path, "rb") as probe:
                try:
                    real_flock(probe.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    seen_unlocked.append(path.name)
                except BlockingIOError:
                    pass
        return real_flock(fd, op)

    monkeypatch.setattr(fcntl, "flock", spy)
    journal.append(_batch(0, 1))
    monkeypatch.setattr(fcntl, "flock", real_flock)
    assert seen_unlocked == []
    assert not list(tmp_path.glob(TMP_PREFIX + "*"))
    journal.close()
    assert journal.pending_records() == 1


def test_stale_temporaries_are_cleared(tmp_path):
    stale = tmp_path / f"{TMP_PREFIX}00000000000000000001-1-000000.jsonl"
    stale.write_bytes(b"")
    Journal(tmp_path)
    assert not stale.exists()
    assert os.listdir(tmp_path) == []
