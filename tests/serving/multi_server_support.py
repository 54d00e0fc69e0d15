"""A real `vigil serve --api-server-count N` on the tiny random Llama, for the multi-process API
server tests (holds no tests itself): start it, read which process answered, stream from it."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
from test_server_support import wait_for

KEY = "multi-api-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
MODEL = "tiny"
SERVER_HEADER = "x-vigil-api-server"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(tmp_path: Path, port: int, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VIGIL_ENV": "development",
        "VIGIL_HOST": "127.0.0.1",
        "VIGIL_PORT": str(port),
        "VIGIL_DEVICE": "cpu",
        "VIGIL_MODEL_NAME": MODEL,
        "VIGIL_API_KEYS": json.dumps([KEY]),
        "VIGIL_KV_CACHE_MEMORY_MB": "16",
        "VIGIL_TORCH_THREADS": "1",
        "VIGIL_SAMPLE_RATE": "0",
        "VIGIL_SEGMENT_MIN_PER_HOUR": "0",
        "VIGIL_DATABASE_URL": f"sqlite:///{tmp_path}/vigil.db",
        "VIGIL_JOURNAL_DIR": str(tmp_path / "journal"),
        "VIGIL_DRAIN_GRACE_S": "60",
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.update(extra)
    return env


class MultiServer:
    """`vigil serve --api-server-count count --model model_dir` as a subprocess."""

    def __init__(self, tmp_path: Path, model_dir: Path, count: int = 2, **env: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp_path / "serve.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "vigil.cli",
                    "serve",
                    "--api-server-count",
                    str(count),
                    "--model",
                    str(model_dir),
                ],
                env=server_env(tmp_path, self.port, **env),
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=tmp_path,
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def healthy(self) -> bool:
        try:
            return httpx.get(self.url + "/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_healthy(self, timeout: float = 90.0) -> None:
        assert wait_for(self.healthy, timeout=timeout, interval=0.2), self.log()

    def core_pid(self) -> int:
        """The newest engine core's pid, from the parent's log."""
        pids = re.findall(r"engine core pid (\d+)|engine core restarted \(pid (\d+)\)", self.log())
        return int([a or b for a, b in pids][-1])

    def api_pids(self) -> list[int]:
        (line,) = re.findall(r"API server processes \(pids ([\d, ]+)\)", self.log())
        return [int(p) for p in line.split(", ")]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def served_by(response: httpx.Response) -> int:
    """The pid of the API process that answered."""
    return int(response.headers[SERVER_HEADER].split(":")[1])


def gone(pid: int) -> bool:
    """Exited and reaped (a zombie counts as gone: only its parent can reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state == "Z"


def completion_total(metrics_text: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(metrics_text):
        if family.name == "vllm:request_success":
            return sum(s.value for s in family.samples if s.name.endswith("_total"))
    raise AssertionError("no vllm:request_success in /metrics")


class Stream:
    """One streaming completion read on a thread: which process served it, its text, its end."""

    def __init__(self, url: str, prompt: str, max_tokens: int):
        import threading

        self.body = {
            "model": MODEL,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": 0,
            "ignore_eos": True,
            "stream": True,
        }
        self.url, self.pid, self.status = url, None, None
        self.text, self.finish, self.error, self.done = "", None, None, False
        self.started = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with (
            httpx.Client(timeout=120) as client,
            client.stream("POST", self.url + "/v1/completions", json=self.body, headers=AUTH) as r,
        ):
            self.status, self.pid = r.status_code, served_by(r)
            for line in r.iter_lines():
                if line == "data: [DONE]":
                    self.done = True
                elif line.startswith("data: "):
                    chunk = json.loads(line[6:])
                    if "error" in chunk:
                        self.error = chunk["error"]
                    for c in chunk.get("choices", []):
                        self.text += c["text"]
                        self.finish = c["finish_reason"] or self.finish
                    self.started.set()
        self.started.set()

    def join(self, timeout: float = 60) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "a stream hung"


def streams_in_both(
    url: str, api_pids: list[int], max_tokens: int, limit: int = 12
) -> list[Stream]:
    """Open streams one by one until every API process has one in flight; those in flight.

    Connections reach the processes by address hash, so the second process may take several
    tries, and an early stream may finish meanwhile: only the unfinished ones count."""
    streams: list[Stream] = []

    def in_flight() -> list[Stream]:
        return [s for s in streams if not s.done]

    while len(streams) < limit and {s.pid for s in in_flight()} != set(api_pids):
        stream = Stream(url, f"Request {len(streams)}: count", max_tokens)
        assert stream.started.wait(30), "a stream did not start"
        streams.append(stream)
    live = in_flight()
    assert {s.pid for s in live} == set(api_pids), [(s.pid, s.done) for s in streams]
    return live
