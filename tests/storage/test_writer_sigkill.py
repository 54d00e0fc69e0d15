"""A writer process SIGKILLed mid-batch (while journaling, and while replaying into a database
that just came back) loses no journaled record, and the restarted writer duplicates none."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from storage.db import session_scope
from storage.models import Sample
from storage.writer import SampleWriter

CHILD = Path(__file__).with_name("writer_child.py")


def _journaled_ids(journal_dir: Path) -> set[str]:
    """Ids on complete (newline-terminated) journal lines: those the child acknowledged."""
    ids = set()
    for path in journal_dir.glob("*.jsonl"):
        for line in path.read_bytes().split(b"\n")[:-1]:
            ids.add(json.loads(line)["id"])
    return ids


def _db_ids(url: str) -> set[str]:
    with session_scope(url) as s:
        return set(s.scalars(select(Sample.id)))


def _wait(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_sigkill_mid_batch_loses_no_journaled_record(pg_url, pg_proxy, tmp_path):
    journal_dir = tmp_path / "journal"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path.cwd()), os.environ.get("PYTHONPATH", "")]),
    }
    child = subprocess.Popen(
        [sys.executable, str(CHILD), pg_proxy.url_for(pg_url), str(journal_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        # database unreachable: the child journals everything it accepts
        _wait(lambda: len(_journaled_ids(journal_dir)) >= 3000)
        # database back: the child replays its journal in batches; kill it in the middle
        pg_proxy.open()
        _wait(lambda: len(_db_ids(pg_url)) > 0)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL

    journaled = _journaled_ids(journal_dir)  # what the dead child left acknowledged on disk
    in_db_at_kill = _db_ids(pg_url)
    print(
        f"at kill: {len(journaled)} journaled, {len(in_db_at_kill)} in db, "
        f"{len(journaled & in_db_at_kill)} in both (replayed, segment not yet deleted)"
    )
    assert journaled, "the kill came after the child finished replaying; nothing left to test"

    restarted = SampleWriter(pg_url, journal_dir, batch_size=500, flush_interval_s=0.05)
    assert restarted.close(timeout=30)
    final = _db_ids(pg_url)
    with session_scope(pg_url) as s:
        rows = s.scalar(select(func.count()).select_from(Sample))
    assert journaled <= final  # no journaled record lost
    assert final == in_db_at_kill | journaled  # nothing invented
    assert rows == len(final)  # none duplicated
    assert restarted.replayed == len(journaled) and restarted.dropped == 0
    assert list(journal_dir.glob("*.jsonl")) == []  # journal drained


# starts real OS processes: left out by make test-fast
pytestmark = pytest.mark.processes
