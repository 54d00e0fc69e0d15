"""Benchmark figures as markdown: printed while a benchmark runs, kept in bench/results/<name>.md.

A benchmark builds one `Table` per kind of figure, prints `table.header()` and then each
`table.add(...)` row as it is measured, and finishes with `write_results(name, tables)`. That
inserts a run section at the top of bench/results/<name>.md (newest first, older runs kept):
the machine, Python, torch, the date, the commit and the exact command, then the tables.
Figures without their machine and command cannot be compared later, hence one header per run.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

# VIGIL_BENCH_RESULTS_DIR sends a trial run's tables elsewhere, keeping bench/results for real runs
RESULTS_DIR = Path(
    os.environ.get("VIGIL_BENCH_RESULTS_DIR") or Path(__file__).resolve().parents[1] / "results"
)


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)

    def header(self) -> str:
        return f"| {' | '.join(self.columns)} |\n|{'---|' * len(self.columns)}"

    def add(self, *cells: object) -> str:
        """Record one row (cells formatted by the caller); return it as a markdown line."""
        if len(cells) != len(self.columns):
            raise ValueError(f"{self.title}: {len(cells)} cells for {len(self.columns)} columns")
        row = ["-" if c is None else str(c) for c in cells]
        self.rows.append(row)
        return f"| {' | '.join(row)} |"

    def markdown(self) -> str:
        lines = [f"### {self.title}", "", self.header()]
        lines += [f"| {' | '.join(row)} |" for row in self.rows]
        return "\n".join(lines)


def _machine() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            count = torch.cuda.device_count()
            return (
                f"{count} x {torch.cuda.get_device_name(0)}"
                if count > 1
                else torch.cuda.get_device_name(0)
            )
    except ImportError:
        pass
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{model}, {os.cpu_count()} CPUs"


def _versions() -> str:
    try:
        import torch
    except ImportError:
        return "torch not installed"
    parts = [f"torch {torch.__version__}"]
    if torch.version.cuda:
        parts.append(f"CUDA {torch.version.cuda}")
    try:
        import triton

        parts.append(f"triton {triton.__version__}")
    except ImportError:
        pass
    return ", ".join(parts)


def _commit() -> str:
    if os.environ.get("VIGIL_BENCH_COMMIT"):  # a copy of the tree without .git (the GPU machine)
        return os.environ["VIGIL_BENCH_COMMIT"]
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent,
            check=False,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return done.stdout.strip() or "unknown"


def run_header(command: str | None = None) -> list[tuple[str, str]]:
    """Where and how the figures were measured."""
    module = sys.modules["__main__"].__spec__
    argv = ["python", "-m", module.name] if module else ["python", sys.argv[0]]
    return [
        ("machine", _machine()),
        ("python", platform.python_version()),
        ("versions", _versions()),
        ("date", datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")),
        ("commit", _commit()),
        ("command", f"`{command or shlex.join(argv + sys.argv[1:])}`"),
    ]


def run_section(tables: list[Table], header: list[tuple[str, str]], notes: list[str] = ()) -> str:
    date = dict(header)["date"]
    lines = [f"## {date} — {dict(header)['machine']}", "", "| | |", "|---|---|"]
    lines += [f"| {key} | {value} |" for key, value in header]
    for table in tables:
        lines += ["", table.markdown()]
    if notes:
        lines += [""] + [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


def write_results(
    name: str, tables: list[Table], notes: list[str] = (), *, directory: Path = RESULTS_DIR
) -> Path:
    """Insert this run at the top of `<directory>/<name>.md` (created with a title if new)."""
    path = directory / f"{name}.md"
    section = run_section(tables, run_header(), list(notes))
    if path.is_file():
        text = path.read_text()
        head, sep, rest = text.partition("\n## ")
        text = head.rstrip("\n") + "\n\n" + section + (("\n## " + rest) if sep else "")
    else:
        directory.mkdir(parents=True, exist_ok=True)
        text = f"# {name}\n\nRuns of `bench/suites/bench_{name}.py`, newest first.\n\n" + section
    path.write_text(text)
    print(f"results: {path}", flush=True)
    return path
