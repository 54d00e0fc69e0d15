"""The judge-validity items: only the named task.json members are read from the sdist, and each
question yields its reference answer (right) and a different one (wrong)."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from bench.workloads.judge_items import ROOT, pairs, read_tasks

ARITHMETIC = {
    "examples": [
        {"input": f"What is {a} plus {b}?", "target": str(a + b),
         "target_scores": {str(a + b): 1.0, "banana": 0.0}}
        for a, b in [(12, 30), (45, 9), (70, 71)]
    ]
}  # fmt: skip
CHOICE = {
    "examples": [
        {"input": "if 2 men need 4 days , how long do 4 men need ?",
         "target_scores": {"8": 0, "2": 1, "4": 0}},
        {"input": "no wrong option here", "target_scores": {"5": 1}},
    ]
}  # fmt: skip


def _sdist(path, members: dict[str, dict]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            raw = json.dumps(data).encode()
            info = tarfile.TarInfo(ROOT + name + "/task.json")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))


def test_only_named_tasks_are_read_and_a_missing_one_is_named(tmp_path):
    sdist = tmp_path / "bigbench-1.0.0.tar.gz"
    _sdist(sdist, {"arithmetic/2_digit_addition": ARITHMETIC, "other/task": {"examples": []}})
    found = read_tasks(sdist, ["arithmetic/2_digit_addition"])
    assert list(found) == ["arithmetic/2_digit_addition"]
    with pytest.raises(KeyError, match="elementary_math_qa/question_only"):
        read_tasks(sdist, ["elementary_math_qa/question_only"])


def test_each_question_gives_a_right_and_a_different_wrong_answer():
    items = pairs(ARITHMETIC, "arithmetic/2_digit_addition", "arithmetic", 10, seed=0)
    assert len(items) == 6 and [i.right for i in items] == [True, False] * 3
    for right, wrong in zip(items[::2], items[1::2], strict=True):
        assert right.question == wrong.question
        a, b = (int(s) for s in right.question[8:-1].split(" plus "))
        assert right.answer == f"The answer is {a + b}."
        moved = int(wrong.answer.removeprefix("The answer is ").rstrip("."))
        assert 1 <= abs(moved - (a + b)) <= 10
    choice = pairs(CHOICE, "elementary_math_qa/question_only", "choice", 10, seed=0)
    assert [(i.answer, i.right) for i in choice] in (
        [("The answer is 2.", True), ("The answer is 8.", False)],
        [("The answer is 2.", True), ("The answer is 4.", False)],
    )  # the question without a wrong option is left out
