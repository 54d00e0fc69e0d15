"""The test registry loads its built-in tests once, and a thread asking while another loads
them waits for the full set (a fresh interpreter, so the first load really happens here)."""

from __future__ import annotations

import subprocess
import sys

CHILD = """
import threading
from drift import registry

barrier = threading.Barrier(4)
seen = []

def ask():
    barrier.wait()
    seen.append(sorted(spec.name for spec in registry.all_tests()))

threads = [threading.Thread(target=ask) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len({tuple(s) for s in seen}), len(seen[0]), registry.get_test("ks").direction)
"""


def test_concurrent_first_use_sees_every_builtin_test():
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120, check=True
    )
    distinct, count, ks_direction = done.stdout.split()
    assert distinct == "1" and int(count) >= 8 and ks_direction == "p_value", done.stdout
