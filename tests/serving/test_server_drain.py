"""SIGTERM on a real `vigil serve` process during 8 streaming requests: all 8 complete, /health
turns 503, new requests are refused, every sample reaches the database, the process exits 0."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select
from test_server_support import wait_for

from storage.db import session_scope
from storage.models import Sample

KEY = "drain-test-key"
N = 8


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stream(url: str, prompt: str, started: threading.Event, result: dict) -> None:
    body = {
        "model": "SmolLM2-135M-Instruct",
        "prompt": prompt,
        "max_tokens": 24,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
    }
    text, reasons, done = "", [], False
    with httpx.stream(
        "POST",
        url + "/v1/completions",
        json=body,
        timeout=120,
        headers={"Authorization": f"Bearer {KEY}"},
    ) as r:
        result["status"] = r.status_code
        for line in r.iter_lines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                chunk = json.loads(line[6:])
                for c in chunk.get("choices", []):
                    text += c["text"]
                    if c["finish_reason"]:
                        reasons.append(c["finish_reason"])
                started.set()
    result.update(text=text, reasons=reasons, done=done)


def test_sigterm_drains_in_flight_streams_and_flushes_samples(tmp_path: Path):
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    db = f"sqlite:///{tmp_path}/vigil.db"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VIGIL_ENV": "development",
        "VIGIL_HOST": "127.0.0.1",
        "VIGIL_PORT": str(port),
        "VIGIL_DATABASE_URL": db,
        "VIGIL_JOURNAL_DIR": str(tmp_path / "journal"),
        "VIGIL_SAMPLE_RATE": "1.0",
        "VIGIL_API_KEYS": json.dumps([KEY]),
        "VIGIL_MAX_MODEL_LEN": "512",
        "VIGIL_KV_CACHE_MEMORY_MB": "64",
        "VIGIL_TORCH_THREADS": "1",
        "VIGIL_DRAIN_GRACE_S": "60",
    }
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vigil.cli", "serve"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
    try:

        def healthy() -> bool:
            try:
                return httpx.get(url + "/health", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        assert wait_for(healthy, timeout=120, interval=0.2), log_path.read_text()
        results = [{} for _ in range(N)]
        started = [threading.Event() for _ in range(N)]
        threads = [
            threading.Thread(
                target=_stream,
                args=(url, f"Request {i}: list some fruits:", started[i], results[i]),
            )
            for i in range(N)
        ]
        for t in threads:
            t.start()
        assert all(e.wait(60) for e in started), "streams did not start"
        proc.send_signal(signal.SIGTERM)

        health = httpx.get(url + "/health", timeout=5)
        assert health.status_code == 503 and health.json()["status"] == "draining"
        refused = httpx.post(
            url + "/v1/completions",
            timeout=5,
            headers={"Authorization": f"Bearer {KEY}"},
            json={"model": "SmolLM2-135M-Instruct", "prompt": "late", "max_tokens": 1},
        )
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "server_draining"
        assert any(t.is_alive() for t in threads)  # the drain really overlapped the streams

        for t in threads:
            t.join(120)
        for r in results:
            assert r["status"] == 200 and r["done"] and r["reasons"] == ["length"], r
        assert proc.wait(timeout=60) == 0, log_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with session_scope(db) as s:
        assert s.scalar(select(func.count()).select_from(Sample)) == N  # no sample lost
        assert set(s.scalars(select(Sample.completion_tokens))) == {24}
        assert {r["text"] for r in results} == set(s.scalars(select(Sample.response)))


# starts real OS processes: left out by make test-fast
pytestmark = pytest.mark.processes
