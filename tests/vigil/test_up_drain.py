"""`vigil up` drains: a streaming chat in flight when `vigil up` is told to stop finishes whole,
whether SIGTERM goes to `vigil up` alone or to its whole process group (Ctrl-C, a service
manager). The stream outlives the sidecar's own exit, so a signal forwarded again when the
sidecar ends would cut it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest
from test_up import free_port, wait_healthy

MAX_TOKENS = 200
GRACE_S = 90


def _env(tmp_path, engine_port: int, sidecar_port: int) -> dict[str, str]:
    return {
        **os.environ,
        "VIGIL_DATABASE_URL": f"sqlite:///{tmp_path}/vigil.db",
        "VIGIL_JOURNAL_DIR": str(tmp_path / "journal"),
        "VIGIL_REPORT_DIR": str(tmp_path / "reports"),
        "VIGIL_PORT": str(engine_port),
        "VIGIL_SIDECAR_PORT": str(sidecar_port),
        "VIGIL_ENGINE_URL": f"http://127.0.0.1:{engine_port}",
        "VIGIL_TORCH_THREADS": "1",
        "VIGIL_DRAIN_GRACE_S": str(GRACE_S),
    }


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as fh:
        return [int(x) for x in fh.read().split()]


def _kill_all(pids: list[int]) -> None:
    """Children in their own sessions outlive a killed `vigil up`: end each group here."""
    for pid in pids:
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(pid, signal.SIGKILL)


def _alive(url: str) -> bool:
    try:
        httpx.get(url, timeout=1)
        return True
    except httpx.HTTPError:
        return False


@pytest.mark.parametrize("target", ["parent", "group"])
def test_stream_in_flight_finishes_when_up_is_stopped(tmp_path, target):
    engine_port, sidecar_port = free_port(), free_port()
    # its own session, so the group signal below reaches `vigil up` and not pytest
    proc = subprocess.Popen(
        [sys.executable, "-m", "vigil.cli", "up"],
        cwd=tmp_path,
        env=_env(tmp_path, engine_port, sidecar_port),
        start_new_session=True,
    )
    engine, sidecar = f"http://127.0.0.1:{engine_port}", f"http://127.0.0.1:{sidecar_port}"
    children: list[int] = []
    try:
        wait_healthy(f"{sidecar}/health", proc, 180)
        wait_healthy(f"{engine}/health", proc, 180)
        children = _children(proc.pid)
        body = {
            "model": "SmolLM2-135M-Instruct",
            "max_tokens": MAX_TOKENS,
            "ignore_eos": True,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "Tell me a long story about a lighthouse."}],
        }
        pieces, finish, usage, signalled_at, sidecar_gone_at = [], None, None, None, None
        with httpx.stream(
            "POST",
            f"{engine}/v1/chat/completions",
            json=body,
            timeout=GRACE_S + 60,
            headers={"Authorization": "Bearer vigil-dev-key"},
        ) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                usage = chunk.get("usage") or usage
                for choice in chunk.get("choices", []):
                    pieces.append(choice.get("delta", {}).get("content") or "")
                    finish = choice.get("finish_reason") or finish
                if signalled_at is None and len(pieces) >= 3:
                    signalled_at = time.monotonic()
                    if target == "parent":
                        os.kill(proc.pid, signal.SIGTERM)
                    else:
                        os.killpg(proc.pid, signal.SIGTERM)
                if (
                    signalled_at is not None
                    and sidecar_gone_at is None
                    and not _alive(f"{sidecar}/health")
                ):
                    sidecar_gone_at = time.monotonic()
        ended_at = time.monotonic()
        assert signalled_at is not None, "the stream ended before the signal was sent"
        assert finish == "length" and usage["completion_tokens"] == MAX_TOKENS, (finish, usage)
        # the case the test exists for: the stream was still running when the sidecar had gone
        assert sidecar_gone_at is not None and sidecar_gone_at < ended_at, (
            "stream ended before the sidecar exited; the test would not see a repeated signal"
        )
        assert proc.wait(timeout=GRACE_S + 30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        _kill_all(children)


# starts real OS processes: left out by make test-fast
pytestmark = pytest.mark.processes
