"""Real HTTP servers on 127.0.0.1 for the sidecar tests: the sidecar app under uvicorn in a
thread, a small OpenAI-style judge engine, and a webhook receiver that records requests."""

from __future__ import annotations

import json
import math
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import uvicorn

API_KEY = "test-ingest-key"
OPERATOR_KEY = "test-operator-key"  # imports: backdated samples, tenant labels


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class UvicornThread:
    """Serve an ASGI app on a free loopback port in a background thread."""

    def __init__(self, app) -> None:
        self.port = free_port()
        self.server = uvicorn.Server(
            uvicorn.Config(
                app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"
            )
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> UvicornThread:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def judge_distribution(user_text: str) -> dict[str, float]:
    """The fake engine's opinion: answers sharing words with the question are good (mass on
    4/5), others poor (mass on 1/2). Deterministic, so tests can compute the expected score."""
    question = user_text.split("QUESTION:\n", 1)[-1].split("\n\nANSWER:\n", 1)[0]
    answer = user_text.split("\n\nANSWER:\n", 1)[-1].split("\n\nReply with", 1)[0]
    words = lambda t: {w for w in re.findall(r"[a-z]{4,}", t.lower())}  # noqa: E731
    overlap = len(words(question) & words(answer))
    if overlap >= 2:
        return {"5": 0.6, "4": 0.3, "3": 0.05, "Hello": 0.05}
    return {"1": 0.5, "2": 0.3, "3": 0.1, "The": 0.1}


class JudgeEngine:
    """Implements POST /v1/chat/completions with `logprobs`/`top_logprobs` like the engine.
    `down=True` makes it answer 503 (overloaded); `requests` counts calls; `seen` keeps each
    call's path, headers and body."""

    def __init__(self) -> None:
        self.down = False
        self.requests = 0
        self.seen: list[tuple[str, dict[str, str], dict]] = []
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                engine.requests += 1
                engine.seen.append((self.path, dict(self.headers.items()), body))
                if engine.down:
                    self._send(503, {"error": {"message": "engine overloaded"}})
                    return
                if self.path != "/v1/chat/completions":
                    self._send(404, {"error": {"message": "not found"}})
                    return
                dist = judge_distribution(body["messages"][-1]["content"])
                top = [{"token": t, "logprob": math.log(p)} for t, p in dist.items()]
                best = max(dist, key=dist.get)
                self._send(
                    200,
                    {
                        "id": "chatcmpl-test",
                        "object": "chat.completion",
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "length",
                                "message": {"role": "assistant", "content": best},
                                "logprobs": {
                                    "content": [
                                        {
                                            "token": best,
                                            "logprob": math.log(dist[best]),
                                            "top_logprobs": top,
                                        }
                                    ]
                                },
                            }
                        ],
                    },
                )

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> JudgeEngine:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


class WebhookReceiver:
    """Records every POST (path, headers, raw body) on a loopback port."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, str], bytes]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    receiver.received.append((self.path, dict(self.headers.items()), raw))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def __enter__(self) -> WebhookReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


class SidecarProcess:
    """`vigil sidecar` as a real subprocess (for SIGKILL and multi-replica tests); its log goes
    to `log_path`."""

    def __init__(self, env: dict[str, str], log_path) -> None:
        import os
        import subprocess
        import sys

        self.port = free_port()
        self.log_path = log_path
        full_env = {**os.environ, **env, "VIGIL_SIDECAR_PORT": str(self.port)}
        self._log = open(log_path, "ab")  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vigil.cli", "sidecar"], env=full_env,
            stdout=self._log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as fh:
            return fh.read()

    def wait_healthy(self, timeout: float = 60.0) -> dict:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"sidecar exited with {self.proc.returncode}:\n{self.log()[-3000:]}"
                )
            try:
                r = httpx.get(f"{self.url}/health", timeout=2)
                if r.status_code == 200:
                    return r.json()
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"sidecar not healthy in {timeout}s:\n{self.log()[-3000:]}")

    def freeze(self) -> None:
        import signal

        self.proc.send_signal(signal.SIGSTOP)

    def kill(self) -> None:
        import signal

        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        if not self._log.closed:
            self._log.close()

    def stop(self, timeout: float = 30.0) -> int:
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except Exception:
                self.proc.kill()
                self.proc.wait(10)
        if not self._log.closed:
            self._log.close()
        return self.proc.returncode


def sidecar_env(database_url: str, report_dir, **extra) -> dict[str, str]:
    """Environment for a test sidecar: the database, a dead engine URL, one thread."""
    env = {
        "VIGIL_DATABASE_URL": database_url,
        "VIGIL_REPORT_DIR": str(report_dir),
        "VIGIL_ENGINE_URL": f"http://127.0.0.1:{free_port()}",  # nobody listens: judge skips
        "VIGIL_API_KEYS": json.dumps([API_KEY]),
        "VIGIL_OPERATOR_KEYS": json.dumps([OPERATOR_KEY]),
        "VIGIL_LEADER_LEASE_S": "2",
        "VIGIL_TORCH_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    env.update({k: str(v) for k, v in extra.items()})
    return env
