"""`vigil proxy --workers N`: N processes share the port and all relay (the official `openai`
client over fresh connections reaches each of them), every worker's samples reach the database
when SIGTERM drains the group, and a worker that dies takes the group down with exit code 1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import httpx
import openai
import pytest
from fake_upstream import WORDS
from sidecar_servers import free_port
from sqlalchemy import func, select

from serving.proxy import workers
from storage.db import session_factory
from storage.migrate import upgrade
from storage.models import Sample

KEY = "proxy-workers-key-0123456789"
CHAT = [{"role": "user", "content": "Where is the cat?"}]


def start_group(upstream_url: str, tmp_path, n: int) -> tuple[subprocess.Popen, str, str]:
    database = f"sqlite:///{tmp_path}/proxy.db"
    upgrade(database)
    port = free_port()
    env = {
        **os.environ,
        "VIGIL_API_KEYS": f'["{KEY}"]',
        "VIGIL_DATABASE_URL": database,
        "VIGIL_JOURNAL_DIR": str(tmp_path / "journal"),
        "VIGIL_SAMPLE_RATE": "1.0",
        "VIGIL_DRAIN_GRACE_S": "5",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "vigil.cli", "proxy", "--upstream", upstream_url]
        + ["--host", "127.0.0.1", "--port", str(port), "--workers", str(n)],
        env=env,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, "vigil proxy exited while starting"
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return proc, base, database
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("vigil proxy did not start")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def worker_of(base: str) -> str:
    """Which worker answers a new connection ("<index>:<pid>")."""
    with openai.OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0) as client:
        raw = client.chat.completions.with_raw_response.create(model="m", messages=CHAT)
        assert raw.parse().choices[0].message.content == "".join(WORDS)
        return raw.headers["x-vigil-api-server"]


def test_every_worker_relays_and_all_samples_land_on_sigterm(upstream, tmp_path):
    proc, base, database = start_group(upstream.url, tmp_path, 2)
    try:
        answered = [worker_of(base) for _ in range(24)]  # each on a new connection
        with openai.OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0) as client:
            stream = client.chat.completions.create(model="m", messages=CHAT, stream=True)
            text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        assert text == "".join(WORDS)
        assert len(set(answered)) == 2  # both processes serve the one port
        pids = {int(w.split(":")[1]) for w in answered}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        stop(proc)
    for pid in pids:  # no worker outlives the group
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    with session_factory(database)() as s:  # each worker's writer flushed as it drained
        assert s.scalar(select(func.count()).select_from(Sample)) == 25
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{base}/health", timeout=2)


def test_a_worker_that_dies_ends_the_group_with_exit_code_1(upstream, tmp_path):
    proc, base, _ = start_group(upstream.url, tmp_path, 2)
    try:
        victim = int(worker_of(base).split(":")[1])
        os.kill(victim, signal.SIGKILL)
        assert proc.wait(timeout=60) == 1
    finally:
        stop(proc)


@pytest.mark.parametrize(
    ("configured", "cpus", "expected"),
    [(3, 2, 3), (0, 2, 1), (0, 16, 4), (0, 128, 8), (1, 128, 1)],
)
def test_worker_count_follows_the_setting_else_the_cpus(monkeypatch, configured, cpus, expected):
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cpus)), raising=False)
    assert workers.worker_count(SimpleNamespace(proxy_workers=configured)) == expected
