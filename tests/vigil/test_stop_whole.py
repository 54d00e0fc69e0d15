"""`vigil demo` stops whole on SIGTERM and SIGHUP as on Ctrl-C, with real processes: a parent
running a child under `stops_with_us` is signalled; the child is told SIGTERM (it drains and
says so) and the parent exits; a child that ignores SIGTERM is killed after the drain time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

CHILD = textwrap.dedent(
    """
    import signal, sys, time
    from pathlib import Path
    out = Path(sys.argv[1])
    def drain(signum, frame):
        out.write_text("drained")
        sys.exit(0)
    signal.signal(signal.SIGTERM, drain if sys.argv[2] == "drains" else signal.SIG_IGN)
    out.write_text("running")
    while True:
        time.sleep(0.05)
    """
)

PARENT = textwrap.dedent(
    """
    import subprocess, sys, time
    from vigil.devtools.stop_whole import stops_with_us
    child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2], sys.argv[3]])
    print(child.pid, flush=True)
    try:
        with stops_with_us(child, drain_s=1.0):
            while True:
                time.sleep(0.05)
    except KeyboardInterrupt as stopped:
        print(f"stopped: {stopped}", flush=True)
        sys.exit(130)
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _run_and_signal(tmp_path: Path, signum: int, child_mode: str) -> tuple[int, str, int, Path]:
    marker = tmp_path / "child"
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, CHILD, str(marker), child_mode],
        stdout=subprocess.PIPE,
        text=True,
    )
    child_pid = int(parent.stdout.readline())
    deadline = time.monotonic() + 30
    while not (marker.exists() and marker.read_text() == "running"):
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.02)
    parent.send_signal(signum)
    out, _ = parent.communicate(timeout=30)
    return parent.returncode, out, child_pid, marker


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_stops_the_child_too(tmp_path, signum):
    code, out, child_pid, marker = _run_and_signal(tmp_path, signum, "drains")
    assert code == 130 and f"stopped by {signal.Signals(signum).name}" in out
    assert marker.read_text() == "drained"  # told with SIGTERM, so it could drain
    assert not _alive(child_pid)


def test_a_child_that_will_not_stop_is_killed(tmp_path):
    started = time.monotonic()
    code, _, child_pid, marker = _run_and_signal(tmp_path, signal.SIGTERM, "ignores")
    assert code == 130 and marker.read_text() == "running"
    assert not _alive(child_pid) and time.monotonic() - started < 20
