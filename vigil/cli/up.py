"""`vigil up`: the engine and the sidecar side by side on the embedded defaults
(`--proxy URL`: the proxy in front of URL instead of the engine).

Two child processes (`vigil serve`, `vigil sidecar`) rather than threads: the engine's torch work
and the sidecar's embedding/drift work would otherwise fight over one interpreter.

Each child runs in its own session, so a signal sent to `vigil up`'s process group (Ctrl-C, a
service manager, `kill -- -PGID`) reaches `vigil up` alone. SIGINT/SIGTERM/SIGHUP to `vigil up`
are forwarded as one SIGTERM to each child, once: the engine reads a second signal as "stop
without waiting", so a repeat (or the sidecar exiting first) must not reach it while it drains
in-flight streams for up to `VIGIL_DRAIN_GRACE_S`. Under systemd use `KillMode=mixed` (SIGTERM to
this process only) and a `TimeoutStopSec` above the grace plus 10 s.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from vigil.config import get_settings


def up_command(args) -> int:
    settings = get_settings()  # validate once here so a bad variable fails before anything starts
    from storage.migrate import upgrade

    upgrade(settings.database_url)
    upstream = getattr(args, "proxy", None)
    front = ["proxy", "--upstream", upstream] if upstream else ["serve"]
    children: list[subprocess.Popen] = []
    stopping = False
    signalled: set[int] = set()  # pids already sent their one SIGTERM

    def stop_children() -> None:
        for child in children:
            if child.pid not in signalled and child.poll() is None:
                signalled.add(child.pid)
                child.send_signal(signal.SIGTERM)

    def forward(signum, _frame):
        nonlocal stopping
        stopping = True
        stop_children()

    # handlers first: a child started in its own session would outlive a `vigil up` killed by
    # the default action of a signal that arrived while it started
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    for command in (front, ["sidecar"]):
        children.append(
            subprocess.Popen([sys.executable, "-m", "vigil.cli", *command], start_new_session=True)
        )
    if stopping:
        stop_children()
    print(
        f"vigil up: {'proxy to ' + upstream if upstream else 'engine'} "
        f"on http://{settings.host}:{settings.port}/v1, "
        f"sidecar on http://{settings.sidecar_host}:{settings.sidecar_port} (Ctrl-C stops both)",
        flush=True,
    )

    while all(child.poll() is None for child in children):
        time.sleep(0.5)
    stop_children()  # one ended: stop the other too (a no-op for a child already signalled)
    deadline = time.monotonic() + settings.drain_grace_s + 10
    for child in children:
        try:
            child.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
    # a child that ended on the SIGTERM we forwarded stopped cleanly
    clean = {0, -signal.SIGTERM} if stopping else {0}
    return 0 if all(child.returncode in clean for child in children) else 1
