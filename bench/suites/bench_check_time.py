"""`vigil check` time on a 3,000-sample reference and a 300-sample window, with the prompt-wording
features (templates mined by drain3, system-prompt hash, instruction length:
drift.features.templates, drift.features.prompt_features) against the same check with them off,
measured in the same run.

The prompts are real prose — paragraphs and sentences of the Python standard library's
docstrings — wrapped in six applications' templates; the window rewords two of them (the
check's answer is printed too). Vectors ride in the records (384 normal values), so no model
loads and the timing is the check's own: reading, baseline build, validation, calibration and
the drift run. Each configuration runs --repeat times, alternating; the median is reported.

    .venv/bin/python -m bench.suites.bench_check_time [--repeat 3]
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

import vigil.cli.check as check
from bench.common.results_table import Table, write_results
from drift.baseline.build import build_baseline

WORDINGS = {
    "summary": ("Summarize the following article:\n{a}\nSummary:", "Give a brief overview.\n{a}"),
    "qa": (
        "Answer the question using the passage.\nPassage: {a}\nQuestion: {q}\nAnswer:",
        "Read the text, then reply.\n{a}\nQ: {q}\nA:",
    ),
    "sentiment": ("What is the sentiment of the following review? {q}",),
    "translate": ("Translate the following sentence to French:\n{q}",),
    "title": ("Write a title for this paragraph: {a}",),
    "keywords": ("Extract the keywords from: {q}",),
}
DIM = 384


def docstring_text() -> tuple[list[str], list[str]]:
    """Paragraphs and sentences of the standard library's docstrings (real prose, offline)."""
    paragraphs: set[str] = set()
    sentences: set[str] = set()
    for name in sorted(sys.stdlib_module_names):
        if name.startswith("_") or name in {"antigravity", "this", "idlelib", "tkinter", "turtle"}:
            continue
        try:
            module = importlib.import_module(name)
        except Exception:  # platform-specific modules
            continue
        for attr in dir(module):
            doc = getattr(getattr(module, attr, None), "__doc__", None)
            if not isinstance(doc, str) or len(doc) < 200:
                continue
            for para in re.split(r"\n\s*\n", doc):
                para = " ".join(para.split())
                if 150 < len(para) < 3000:
                    paragraphs.add(para)
                sentences.update(s for s in re.split(r"(?<=[.?!])\s+", para) if 30 < len(s) < 200)
    return sorted(paragraphs), sorted(sentences)


def records(rng, n, paragraphs, sentences, reword=(), start=0.0):
    apps = sorted(WORDINGS)
    out = []
    for i in range(n):
        app = apps[int(rng.integers(len(apps)))]
        wording = WORDINGS[app][1 if app in reword else 0]
        prompt = wording.format(
            a=paragraphs[int(rng.integers(len(paragraphs)))],
            q=sentences[int(rng.integers(len(sentences)))],
        )
        out.append(
            {
                "id": f"r{start}-{i}",
                "timestamp": start + i,
                "prompt": prompt,
                "response": "ok",
                "prompt_tokens": len(prompt) // 4,
                "completion_tokens": int(rng.integers(20, 200)),
                "prompt_embedding": rng.normal(size=DIM).round(4).tolist(),
                "response_embedding": rng.normal(size=DIM).round(4).tolist(),
            }
        )
    return out


def write(path: Path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def timed(
    ref: Path, cur: Path, templates: bool, cache: Path | None = None
) -> tuple[float, list[str]]:
    check.build_baseline = partial(build_baseline, templates=templates)
    started = time.perf_counter()
    report, _ = check.run_check(
        str(ref),
        str(cur),
        segment_by=[],
        seed=0,
        baseline_cache=None if cache is None else str(cache),
    )
    return time.perf_counter() - started, sorted({a.rule for a in report.alerts})


def cache_rows(ref: Path, cur: Path, repeat: int) -> Table:
    """The same check cold (no cache), cold filling --baseline-cache, and warm from it."""
    table = Table(
        "vigil check --baseline-cache, 3,000 + 300 (prompt-wording features on)",
        ["run", "median s", "runs", "alerts"],
    )
    cache = ref.parent / "cache"
    runs: dict[str, list[float]] = {"cold, no cache": [], "cold, filling the cache": [], "warm": []}
    alerts: dict[str, list[str]] = {}
    for _ in range(repeat):
        shutil.rmtree(cache, ignore_errors=True)
        for name, where in (
            ("cold, no cache", None),
            ("cold, filling the cache", cache),
            ("warm", cache),
        ):
            seconds, alerts[name] = timed(ref, cur, True, where)
            runs[name].append(seconds)
            print(f"{name}: {seconds:.2f} s", flush=True)
    for name, values in runs.items():
        spread = ", ".join(f"{t:.2f}" for t in values)
        median = f"{statistics.median(values):.2f}"
        print(table.add(name, median, spread, ", ".join(alerts[name]) or "none"))
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cache", action="store_true", help="time --baseline-cache cold and warm")
    args = ap.parse_args()
    paragraphs, sentences = docstring_text()
    rng = np.random.default_rng(0)
    half = len(paragraphs) // 2
    with tempfile.TemporaryDirectory() as tmp:
        ref, cur = Path(tmp) / "ref.jsonl", Path(tmp) / "cur.jsonl"
        write(ref, records(rng, 3000, paragraphs[:half], sentences[: len(sentences) // 2]))
        write(
            cur,
            records(
                rng,
                300,
                paragraphs[half:],
                sentences[len(sentences) // 2 :],
                reword=("summary", "qa"),
                start=1e6,
            ),
        )
        if args.cache:
            with threadpool_limits(1):
                table = cache_rows(ref, cur, args.repeat)
            write_results("check_time", [table], ["1 thread; vectors in the records"])
            return
        times: dict[bool, list[float]] = {True: [], False: []}
        rules: dict[bool, list[str]] = {}
        with threadpool_limits(1):
            for _ in range(args.repeat):
                for on in (False, True):
                    seconds, rules[on] = timed(ref, cur, on)
                    times[on].append(seconds)
                    print(f"templates={on}: {seconds:.2f} s", flush=True)
    table = Table(
        "vigil check, 3,000-sample reference + 300-sample window (two templates reworded)",
        ["prompt-wording features", "median s", "runs", "alerts"],
    )
    for on in (False, True):
        print(
            table.add(
                "on" if on else "off",
                f"{statistics.median(times[on]):.2f}",
                ", ".join(f"{t:.2f}" for t in times[on]),
                ", ".join(rules[on]) or "none",
            )
        )
    ratio = statistics.median(times[True]) / statistics.median(times[False])
    notes = [f"on / off: {ratio:.2f}x (budget 1.5x)", "1 thread; vectors in the records"]
    print(notes[0])
    write_results("check_time", [table], notes)


if __name__ == "__main__":
    main()
