"""BIG-bench task examples read straight from the PyPI sdist `bigbench==1.0.0`.

The sdist (about 360 MB) carries every task as `bigbench/benchmark_tasks/<task>/task.json`
(subtasks one folder deeper). `fetch_sdist` downloads it once into a cache folder from the
package index's JSON API (PEP 691), checking the index's sha256: `pip download` cannot fetch it,
since preparing the sdist's metadata fails on its direct-URL dependency (bleurt);
`read_tasks` streams the tarball and parses only the members of the tasks asked for, so nothing
is extracted to disk. A task's examples keep their `input` and one reference answer: `target`
(a string or the first of a list) or else the best-scored key of `target_scores`.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

SDIST_FILE = "bigbench-1.0.0.tar.gz"
INDEX = "https://pypi.org/simple/bigbench/"
TASKS_DIR = "bigbench/benchmark_tasks/"


@dataclass(frozen=True)
class Example:
    task: str  # "date_understanding", "arithmetic/2_digit_addition"
    input: str
    answer: str  # the reference answer


def fetch_sdist(cache: Path) -> Path:
    """The sdist in `cache`, downloaded from the package index when absent."""
    import httpx

    path = cache / SDIST_FILE
    if path.is_file():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    accept = {"Accept": "application/vnd.pypi.simple.v1+json"}
    files = httpx.get(INDEX, headers=accept, follow_redirects=True, timeout=60).json()["files"]
    [entry] = [f for f in files if f["filename"] == SDIST_FILE]
    digest, part = hashlib.sha256(), path.with_suffix(".part")
    with (
        httpx.stream("GET", entry["url"], follow_redirects=True, timeout=600) as r,
        part.open("wb") as out,
    ):
        r.raise_for_status()
        for chunk in r.iter_bytes(1 << 20):
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != entry["hashes"]["sha256"]:
        part.unlink()
        raise RuntimeError(f"{SDIST_FILE}: sha256 differs from the index's")
    part.rename(path)
    return path


def task_of(member: str) -> str | None:
    """The task a tarball member holds (`<root>/bigbench/benchmark_tasks/<task>/task.json`)."""
    if not member.endswith("/task.json"):
        return None
    head, sep, rest = member.partition(TASKS_DIR)
    if not sep or head.count("/") > 1:
        return None
    task = rest[: -len("/task.json")]
    return task or None


def reference_answer(example: dict) -> str | None:
    target = example.get("target")
    if isinstance(target, list):
        target = target[0] if target else None
    if isinstance(target, str) and target.strip():
        return target.strip()
    scores = example.get("target_scores")
    if isinstance(scores, dict) and scores:
        best = max(scores.items(), key=lambda kv: float(kv[1]))
        return str(best[0]).strip() or None
    return None


def read_tasks(tarball: Path, tasks: set[str]) -> dict[str, list[Example]]:
    """Examples of each task in `tasks`, in file order; KeyError names the tasks not found."""
    found: dict[str, list[Example]] = {}
    with tarfile.open(tarball, mode="r|gz") as archive:  # a stream: one pass, no seeking
        for member in archive:
            task = task_of(member.name)
            if task not in tasks or not member.isfile():
                continue
            handle = archive.extractfile(member)
            assert handle is not None
            data = json.load(handle)
            found[task] = [
                Example(task, str(ex["input"]).strip(), answer)
                for ex in data.get("examples", [])
                if isinstance(ex.get("input"), str)
                and ex["input"].strip()
                and (answer := reference_answer(ex)) is not None
            ]
    missing = sorted(tasks - found.keys())
    if missing:
        raise KeyError(f"{tarball.name}: no task.json for {', '.join(missing)}")
    return found
