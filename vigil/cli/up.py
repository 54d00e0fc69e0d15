"""`vigil up`: the engine and the sidecar side by side on the embedded defaults
(`--proxy URL`: the proxy in front of URL instead of the engine).

Two child processes (`vigil serve`, `vigil sidecar`) rather than threads: the engine's torch work
and the sidecar's embedding/drift work would otherwise fight over one interpreter. SIGINT/SIGTERM
are forwarded so the engine drains and the writer flushes before exit.
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
    children = [
        subprocess.Popen([sys.executable, "-m", "vigil.cli", *front]),
        subprocess.Popen([sys.executable, "-m", "vigil.cli", "sidecar"]),
    ]
    print(
        f"vigil up: {'proxy to ' + upstream if upstream else 'engine'} on http://{settings.host}:{settings.port}/v1, "
        f"sidecar on http://{settings.sidecar_host}:{settings.sidecar_port} (Ctrl-C stops both)",
        flush=True,
    )

    stopping = False

    def forward(signum, _frame):
        nonlocal stopping
        stopping = True
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    while all(child.poll() is None for child in children):
        time.sleep(0.5)
    forward(signal.SIGTERM, None)  # one died: stop the other too
    deadline = time.monotonic() + settings.drain_grace_s + 10
    for child in children:
        try:
            child.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
    # a child that ended on the SIGTERM we forwarded stopped cleanly
    clean = {0, -signal.SIGTERM} if stopping else {0}
    return 0 if all(child.returncode in clean for child in children) else 1
