"""`vigil up` (what `make run` starts): engine and sidecar come up healthy and stop cleanly."""

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "vigil up exited early"
        try:
            response = httpx.get(url, timeout=2)
            if response.status_code == 200:
                return response.json()
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{url} never became healthy")


def test_up_runs_engine_and_sidecar_and_stops_on_sigterm(tmp_path):
    engine_port, sidecar_port = free_port(), free_port()
    env = {
        **os.environ,
        "VIGIL_DATABASE_URL": f"sqlite:///{tmp_path}/vigil.db",
        "VIGIL_JOURNAL_DIR": str(tmp_path / "journal"),
        "VIGIL_REPORT_DIR": str(tmp_path / "reports"),
        "VIGIL_PORT": str(engine_port),
        "VIGIL_SIDECAR_PORT": str(sidecar_port),
        "VIGIL_ENGINE_URL": f"http://127.0.0.1:{engine_port}",
        "VIGIL_TORCH_THREADS": "1",
        "VIGIL_DRAIN_GRACE_S": "5",
    }
    proc = subprocess.Popen([sys.executable, "-m", "vigil.cli", "up"], env=env, cwd=tmp_path)
    try:
        sidecar = wait_healthy(f"http://127.0.0.1:{sidecar_port}/health", proc, 120)
        assert sidecar["database"] is True
        wait_healthy(f"http://127.0.0.1:{engine_port}/health", proc, 120)
        reply = httpx.post(
            f"http://127.0.0.1:{engine_port}/v1/completions",
            headers={"Authorization": "Bearer vigil-dev-key"},
            json={
                "model": "SmolLM2-135M-Instruct",
                "prompt": "The capital of France is",
                "max_tokens": 3,
                "temperature": 0,
            },
            timeout=60,
        )
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] >= 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# starts real OS processes: left out by make test-fast
pytestmark = pytest.mark.processes
