"""Math questions with a known right answer and a wrong one, from BIG-bench (the PyPI sdist
bigbench==1.0.0): arithmetic (the reference sum, difference or product against the same number
moved by 1 to 10) and elementary_math_qa (the reference option against another of its options).

Only the task.json members named in TASKS are read out of the sdist, with tarfile; the sdist is
fetched with `pip download --no-deps` when it is not at the given path.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SDIST = "bigbench-1.0.0.tar.gz"
ROOT = "bigbench-1.0.0/bigbench/benchmark_tasks/"
TASKS = {
    "arithmetic/2_digit_addition": "arithmetic",
    "arithmetic/2_digit_subtraction": "arithmetic",
    "arithmetic/2_digit_multiplication": "arithmetic",
    "elementary_math_qa/question_only": "choice",
}


@dataclass(frozen=True)
class Item:
    task: str
    question: str
    answer: str
    right: bool


def ensure_sdist(path: Path) -> Path:
    """The sdist at `path`, downloaded into its folder by pip when absent."""
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         "-d", str(path.parent), "bigbench==1.0.0"],
        check=True,
    )  # fmt: skip
    if not path.is_file():
        raise FileNotFoundError(f"pip download left no {path.name} in {path.parent}")
    return path


def read_tasks(sdist: Path, tasks: list[str]) -> dict[str, dict]:
    """task name -> its parsed task.json, reading only those members of the sdist."""
    wanted = {ROOT + name + "/task.json": name for name in tasks}
    found: dict[str, dict] = {}
    with tarfile.open(sdist, "r:gz") as tar:
        for member in tar:
            name = wanted.get(member.name)
            if name is None or not member.isfile():
                continue
            handle = tar.extractfile(member)
            if handle is not None:
                found[name] = json.load(handle)
            if len(found) == len(wanted):
                break
    missing = sorted(set(tasks) - set(found))
    if missing:
        raise KeyError(f"{sdist.name} holds no task.json for {', '.join(missing)}")
    return found


def _right(example: dict) -> str | None:
    scores = example.get("target_scores") or {}
    best = [k for k, v in scores.items() if v == 1]
    return str(example["target"]) if "target" in example else (best[0] if best else None)


def _wrong(kind: str, example: dict, right: str, rng: np.random.Generator) -> str | None:
    if kind == "arithmetic":
        try:
            value = int(right)
        except ValueError:
            return None
        step = int(rng.integers(1, 11))
        return str(value + (step if rng.random() < 0.5 else -step))
    others = [k for k, v in (example.get("target_scores") or {}).items() if v != 1 and k != right]
    return str(others[int(rng.integers(len(others)))]) if others else None


def pairs(task_json: dict, task: str, kind: str, count: int, seed: int) -> list[Item]:
    """`count` seeded questions of one task, each as a right and a wrong item."""
    rng = np.random.default_rng([seed, len(task)])
    examples = task_json.get("examples") or []
    out: list[Item] = []
    for i in rng.permutation(len(examples)):
        example = examples[int(i)]
        right = _right(example)
        wrong = None if right is None else _wrong(kind, example, right, rng)
        if right is None or wrong is None or wrong == right:
            continue
        question = str(example["input"]).strip()
        out += [
            Item(task, question, f"The answer is {right}.", True),
            Item(task, question, f"The answer is {wrong}.", False),
        ]
        if len(out) >= 2 * count:
            break
    return out


def load_items(sdist: Path, per_task: int, seed: int = 0) -> list[Item]:
    data = read_tasks(ensure_sdist(sdist), list(TASKS))
    return [
        item
        for task, kind in TASKS.items()
        for item in pairs(data[task], task, kind, per_task, seed)
    ]
