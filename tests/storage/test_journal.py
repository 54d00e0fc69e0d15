"""The spill journal: durable appends, ordered replay, torn tails, corrupt lines, locked
segments."""

from __future__ import annotations

import fcntl
import json

import pytest

from storage.journal import Journal


def test_append_replay_in_order_and_delete(tmp_path):
    journal = Journal(tmp_path)
    journal.append([{"id": str(i)} for i in range(5)])
    journal.rotate()
    journal.append([{"id": str(i)} for i in range(5, 8)])
    assert journal.has_pending() and journal.pending_records() == 8
    seen: list[str] = []
    journal.replay(lambda chunk: seen.extend(r["id"] for r in chunk), chunk_size=3)
    assert seen == [str(i) for i in range(8)]
    assert not journal.has_pending() and list(tmp_path.glob("*.jsonl")) == []


def test_failed_sink_keeps_the_segment_for_the_next_replay(tmp_path):
    journal = Journal(tmp_path)
    journal.append([{"id": str(i)} for i in range(6)])

    def failing(chunk):
        if chunk[0]["id"] == "3":
            raise ConnectionError("db down")

    with pytest.raises(ConnectionError):
        journal.replay(failing, chunk_size=3)
    seen: list[str] = []
    journal.replay(lambda chunk: seen.extend(r["id"] for r in chunk), chunk_size=3)
    assert seen == [str(i) for i in range(6)]  # resent whole: the sink is idempotent


def test_torn_last_line_and_corrupt_line_tolerated(tmp_path):
    journal = Journal(tmp_path)
    journal.append([{"id": "a"}, {"id": "b"}])
    journal.rotate()
    segment = next(tmp_path.glob("*.jsonl"))
    with open(segment, "ab") as fh:  # a damaged complete line, then a crash mid-write
        fh.write(b"{not json}\n" + json.dumps({"id": "c"}).encode()[:7])
    reopened = Journal(tmp_path)  # a new process finds the leftover
    seen: list[str] = []
    reopened.replay(lambda chunk: seen.extend(r["id"] for r in chunk))
    assert seen == ["a", "b"]
    assert reopened.torn == 1 and reopened.corrupt == 1
    corrupt = next(tmp_path.glob("corrupt-*.txt")).read_text()
    assert "{not json}" in corrupt


def test_segment_held_by_a_live_writer_is_skipped(tmp_path):
    other = tmp_path / "00000000000000000001-99999-000000.jsonl"
    other.write_bytes(b'{"id": "theirs"}\n')
    with open(other, "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # another writer still appends to it
        journal = Journal(tmp_path)
        journal.append([{"id": "mine"}])
        seen: list[str] = []
        journal.replay(lambda chunk: seen.extend(r["id"] for r in chunk))
        assert seen == ["mine"] and other.exists()
    journal.replay(lambda chunk: seen.extend(r["id"] for r in chunk))  # released: now replayed
    assert seen == ["mine", "theirs"] and not other.exists()
