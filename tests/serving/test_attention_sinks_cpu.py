"""The Triton paged attention kernels' sink logic, run by the Triton interpreter on the CPU.

gpt-oss's attention sinks join each softmax's denominator once: in the decode kernel when the
context is not split, in the merge kernel when it is, and in every prefill row. The interpreter
runs the same kernel code as the GPU (float32 here, small shapes) against the torch path, so a
sink counted once per split, or not at all, fails without a GPU. The kernels are decorated at
import, so the check runs in a child process started with TRITON_INTERPRET=1. Skipped where the
`triton` package is absent (CPU-only installs).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOL = 1e-5  # float32 kernels against the float32 torch path

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="needs the triton package (interpreter)"
)

CASES = """
import json, torch
from sink_cases import sink_errors
decode = [(30, 1), (70, 1), (5, 1)]
prefill = [(0, 20), (33, 9)]
out = {}
cpu = {"device": "cpu", "dtype": torch.float32}
out["decode full"] = sink_errors(decode, 4, 2, 16, **cpu)
out["decode sliding"] = sink_errors(decode, 4, 2, 16, window=24, **cpu)
out["decode one kv head, dim 64"] = sink_errors(decode, 4, 1, 64, **cpu)
out["decode, no sinks"] = sink_errors(decode, 4, 2, 16, use_sinks=False, **cpu)
out["prefill full"] = sink_errors(prefill, 4, 2, 16, **cpu)
out["prefill sliding, softcap"] = sink_errors(prefill, 4, 2, 16, window=8, softcap=5.0, **cpu)
out["prefill, no sinks"] = sink_errors(prefill, 4, 2, 16, use_sinks=False, **cpu)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def errors() -> dict[str, dict[str, float]]:
    paths = [str(ROOT), str(ROOT / "tests" / "support"), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join(paths)}
    done = subprocess.run(
        [sys.executable, "-c", CASES],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_interpreted_kernels_match_the_torch_path_with_sinks(errors):
    for case, errs in errors.items():
        for path, err in errs.items():
            if path != "sink_effect":
                assert err < TOL, (case, path, err)


def test_the_cases_exercise_the_sinks(errors):
    # a kernel that ignored the sinks would be off by this much: far past TOL
    assert all(errs["sink_effect"] > 0.1 for errs in errors.values())


def test_split_decode_is_checked_split_and_unsplit(errors):
    assert {"decode/1", "decode/4"} <= set(errors["decode full"])
