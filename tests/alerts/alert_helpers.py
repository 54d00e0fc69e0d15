"""Test helpers for the alerts tests: a real signed-webhook receiver on 127.0.0.1, a fake clock,
settings pointing at it, drift-run rows and proposals. (A uniquely named module: tests import
siblings by basename.)"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from alerts.signing import IDEMPOTENCY_HEADER, SignatureError, verify
from storage.models import DriftRun
from vigil.config import load_settings

SECRET = "test-secret-0123456789abcdef"
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


class FakeClock:
    """The time everyone in a test agrees on: the worker signs with it, the receiver checks it."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


@dataclass
class Received:
    key: str
    body: bytes
    headers: dict[str, str]
    payload: dict


class Receiver:
    """A webhook receiver on 127.0.0.1 that verifies signatures and dedupes on Idempotency-Key.

    mode: "up" (200), "503" (Service Unavailable, Retry-After optional), "400", "slow" (the first
    request per key is processed, then the answer is held past the client's timeout).
    stop() closes the socket: connections are then refused until start() again, same port.
    """

    def __init__(self, secret: str, clock, tolerance_s: float = 300) -> None:
        self.secret, self.clock, self.tolerance_s = secret, clock, tolerance_s
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.mode = "up"
        self.retry_after: str | None = None
        self.slow_s = 1.0
        self.processed: dict[str, Received] = {}  # the receiver's idempotent side effect
        self.hits: Counter[str] = Counter()  # every authentic request, per key
        self.duplicates: Counter[str] = Counter()
        self.rejected: list[str] = []
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status, answer = receiver.handle(body, dict(self.headers.items()))
                if status == "slow":
                    time.sleep(receiver.slow_s)
                    status = 200
                try:
                    self.send_response(status)
                    if status == 503 and receiver.retry_after:
                        self.send_header("Retry-After", receiver.retry_after)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(json.dumps(answer).encode())
                except OSError:  # the client gave up waiting (the "slow" mode)
                    pass

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def handle(self, body: bytes, headers: dict[str, str]) -> tuple[int | str, dict]:
        try:
            verify(body, headers, self.secret, self.tolerance_s, now=self.clock().timestamp())
        except SignatureError as exc:
            with self.lock:
                self.rejected.append(str(exc))
            return 401, {"error": str(exc)}
        key = next((v for k, v in headers.items() if k.lower() == IDEMPOTENCY_HEADER.lower()), "")
        with self.lock:
            self.hits[key] += 1
            if self.mode == "503":
                return 503, {"error": "down for maintenance"}
            if self.mode == "400":
                return 400, {"error": "bad event"}
            if key in self.processed:
                self.duplicates[key] += 1
                return 200, {"status": "duplicate ignored"}
            self.processed[key] = Received(key, body, headers, json.loads(body))
            first = self.hits[key] == 1
        return ("slow" if self.mode == "slow" and first else 200), {"status": "accepted"}


def make_settings(url: str, targets: list[str], **overrides):
    values = dict(
        database_url=url,
        webhook_targets=targets,
        webhook_secret=SECRET,
        public_url="http://vigil.test:8001",
        alert_cooldown_s=3600,
        delivery_max_attempts=5,
        delivery_backoff_base_s=10.0,
        delivery_backoff_cap_s=1000.0,
        delivery_timeout_s=2.0,
        alert_rules_path=None,
    )
    values.update(overrides)
    return load_settings(**values)


def make_run(session, now: datetime) -> int:
    """A drift_runs row for alerts to point at (alerts.run_id is a foreign key)."""
    run = DriftRun(
        window_start=now - timedelta(hours=1),
        window_end=now,
        started_at=now,
        status="done",
        num_samples=100,
    )
    session.add(run)
    session.flush()
    return run.id


def proposal(rule="token_psi", segment="*", severity="moderate", kind="prompt", **evidence):
    return {
        "severity": severity,
        "rule": rule,
        "kind": kind,
        "segment": segment,
        "summary": f"{rule} drifted on {segment}",
        "evidence": evidence or {"test": "psi", "feature": "prompt_tokens", "statistic": 0.4},
    }
