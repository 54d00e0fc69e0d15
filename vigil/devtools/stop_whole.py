"""A child process that stops with its parent: `stops_with_us(popen)` turns SIGTERM and SIGHUP
into the same unwinding as Ctrl-C (a `KeyboardInterrupt`), so the parent's `finally` sends the
child SIGTERM, waits for it to drain, and kills it only if it will not stop. `vigil demo` runs
`vigil up` (which forwards the signal to its engine and sidecar) this way."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Iterator
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
DRAIN_S = 60.0


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")


@contextlib.contextmanager
def stops_with_us(child: subprocess.Popen, drain_s: float = DRAIN_S) -> Iterator[None]:
    """Inside the block SIGTERM and SIGHUP unwind like Ctrl-C; on the way out, however it is
    left, the child gets SIGTERM, `drain_s` to exit, then SIGKILL. The handlers are restored."""
    previous = {s: signal.signal(s, _interrupt) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        try:
            stop(child, drain_s)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)


def stop(child: subprocess.Popen, drain_s: float = DRAIN_S) -> None:
    if child.poll() is not None:
        return
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(timeout=drain_s)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
