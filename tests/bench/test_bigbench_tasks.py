"""bench/workloads/bigbench_tasks.py: only the asked tasks' task.json members are read from the
sdist."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.workloads.bigbench_tasks import read_tasks, reference_answer, task_of

ROOT = "bigbench-1.0.0/bigbench/benchmark_tasks"


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def _task(*examples: dict) -> bytes:
    return json.dumps({"name": "t", "examples": list(examples)}).encode()


@pytest.fixture
def sdist(tmp_path: Path) -> Path:
    path = tmp_path / "bigbench-1.0.0.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        _add(archive, "bigbench-1.0.0/setup.py", b"print('not json')")
        _add(
            archive,
            f"{ROOT}/dates/task.json",
            _task(
                {"input": "Today is 1/2/2020. Tomorrow?", "target_scores": {"a": 0, "b": 1}},
                {"input": "   ", "target": "blank input is dropped"},
                {"input": "no answer at all"},
            ),
        )
        _add(archive, f"{ROOT}/arith/2_digit/task.json", _task({"input": "1+1", "target": "2"}))
        _add(archive, f"{ROOT}/arith/task.json", b'{"name": "arith", "subtasks": []}')
        _add(archive, f"{ROOT}/unwanted/task.json", b"not even json")
        _add(archive, f"{ROOT}/dates/README.md", b"# dates")
        _add(archive, f"vendored/{ROOT}/dates/task.json", b"not this copy")
    return path


def test_reads_only_the_asked_members_with_one_answer_each(sdist):
    tasks = read_tasks(sdist, {"dates", "arith/2_digit"})
    assert sorted(tasks) == ["arith/2_digit", "dates"]
    assert [(e.input, e.answer) for e in tasks["dates"]] == [("Today is 1/2/2020. Tomorrow?", "b")]
    assert [(e.task, e.input, e.answer) for e in tasks["arith/2_digit"]] == [
        ("arith/2_digit", "1+1", "2")
    ]


def test_a_task_missing_from_the_sdist_is_named(sdist):
    with pytest.raises(KeyError, match="nope"):
        read_tasks(sdist, {"dates", "nope"})


def test_member_names_map_to_tasks():
    assert task_of(f"{ROOT}/date_understanding/task.json") == "date_understanding"
    assert task_of(f"{ROOT}/arithmetic/2_digit_addition/task.json") == "arithmetic/2_digit_addition"
    assert task_of(f"{ROOT}/date_understanding/README.md") is None
    assert task_of(f"x/{ROOT}/date_understanding/task.json") is None
    assert task_of(f"{ROOT}/task.json") is None


def test_reference_answer_prefers_the_target_then_the_best_score():
    assert reference_answer({"target": ["three", "3"]}) == "three"
    assert reference_answer({"target": "", "target_scores": {"no": 0.0, "yes": 1.0}}) == "yes"
    assert reference_answer({"target": []}) is None
    assert reference_answer({}) is None


@given(st.text())
def test_any_member_name_gives_a_task_or_none(name):
    task = task_of(name)
    assert task is None or (task and name.endswith(f"{task}/task.json"))
