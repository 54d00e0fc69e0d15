"""`vigil demo [--quick]`: watch Vigil catch a drift in minutes, on this machine.

Starts a local webhook receiver, then engine and sidecar (`vigil up`) on a fresh SQLite file
under the demo directory; backdates a steady day of support traffic through the ingest API,
sends live requests through the OpenAI API, builds, validates and activates the baseline from
the dashboard's /baselines page, then a drift event arrives (a new kind of user and a prompt
change) and the drift window runs. It prints the dashboard and the signed alert the receiver got.
`--quick` sends less traffic and stops everything at the end (what the test runs).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from vigil.devtools.demo_steps import (
    DemoHttp,
    ask_engine,
    baseline_from_page,
    dashboard_lead,
    drift_alerts,
    ingest_drift_event,
    ingest_steady_day,
    run_drift_window,
    say,
    wait_for,
)
from vigil.devtools.stop_whole import stops_with_us

API_KEY = "vigil-demo-key-0123456789"
ADMIN_KEY = "vigil-demo-admin-0123456789"
OPERATOR_KEY = "vigil-demo-operator-0123456789"  # backdates the steady day, names its tenants


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Receiver:
    """A webhook receiver on 127.0.0.1 that checks each delivery's signature."""

    def __init__(self, secret: str) -> None:
        from alerts.signing import SignatureError, verify

        self.received: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    verify(body, dict(self.headers), secret)
                    ok = True
                except SignatureError:
                    ok = False
                outer.received.append({"verified": ok, "body": json.loads(body or b"{}")})
                self.send_response(200 if ok else 401)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", _free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def demo_env(workdir: Path, receiver: Receiver, secret: str, to: DemoHttp) -> dict[str, str]:
    """`vigil up`'s environment: a fresh SQLite file, the demo's keys, the receiver as the one
    webhook target, every sample kept, and short job intervals."""
    db = workdir / f"demo-{int(time.time())}.db"
    return {
        **os.environ,
        "VIGIL_ENV": "development",
        "VIGIL_DATABASE_URL": f"sqlite:///{db}",
        "VIGIL_REPORT_DIR": str(workdir / "reports"),
        "VIGIL_JOURNAL_DIR": str(workdir / "journal"),
        "VIGIL_API_KEYS": json.dumps([API_KEY]),
        "VIGIL_ADMIN_KEYS": json.dumps([ADMIN_KEY]),
        "VIGIL_OPERATOR_KEYS": json.dumps([OPERATOR_KEY]),
        "VIGIL_WEBHOOK_TARGETS": json.dumps([receiver.url]),
        "VIGIL_WEBHOOK_SECRET": secret,
        "VIGIL_PORT": to.engine.rsplit(":", 1)[1],
        "VIGIL_SIDECAR_PORT": to.sidecar.rsplit(":", 1)[1],
        "VIGIL_ENGINE_URL": to.engine,
        "VIGIL_PUBLIC_URL": to.sidecar,
        "VIGIL_SAMPLE_RATE": "1.0",
        "VIGIL_SEGMENT_MIN_PER_HOUR": "0",
        "VIGIL_EVAL_SHARE": "0.0",
        "VIGIL_EMBED_INTERVAL_S": "15",
        "VIGIL_DELIVERY_POLL_INTERVAL_S": "1",
        "VIGIL_KV_CACHE_MEMORY_MB": "128",
    }


def demo_command(args: Any) -> int:
    quick = bool(getattr(args, "quick", False))
    workdir = Path(getattr(args, "dir", None) or "var/demo").resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_hex(24)
    receiver = Receiver(secret)
    to = DemoHttp(
        engine=f"http://127.0.0.1:{_free_port()}",
        sidecar=f"http://127.0.0.1:{_free_port()}",
        key={"Authorization": f"Bearer {API_KEY}"},
        admin={"Authorization": f"Bearer {ADMIN_KEY}"},
        importer={"Authorization": f"Bearer {OPERATOR_KEY}"},
    )
    env = demo_env(workdir, receiver, secret, to)
    started = time.monotonic()
    say(
        f"webhook receiver on {receiver.url}; "
        f"starting engine ({to.engine}) and sidecar ({to.sidecar})"
    )
    up = subprocess.Popen([sys.executable, "-m", "vigil.cli", "up"], env=env)
    try:
        with stops_with_us(up):  # SIGTERM and SIGHUP stop engine and sidecar as Ctrl-C does
            return _run(up, to=to, env=env, receiver=receiver, quick=quick, started=started)
    except KeyboardInterrupt as stopped:
        say(f"{stopped or 'interrupted'}: engine and sidecar stopped")
        return 130
    finally:
        receiver.server.shutdown()


def _run(
    up: subprocess.Popen[bytes],
    *,
    to: DemoHttp,
    env: dict[str, str],
    receiver: Receiver,
    quick: bool,
    started: float,
) -> int:
    with httpx.Client(timeout=600) as http:
        wait_for("engine start", lambda: http.get(f"{to.engine}/health").status_code == 200, 600)
        wait_for("sidecar start", lambda: http.get(f"{to.sidecar}/health").status_code == 200, 300)
        day_start, day_end = ingest_steady_day(http, to, quick)
        ask_engine(http, to, quick)
        baseline_from_page(http, to, day_start, day_end)
        ingest_drift_event(http, to, quick)
        report = run_drift_window(env)
        wait_for(
            "a signed drift alert at the receiver", lambda: drift_alerts(receiver.received), 120
        )
        lead = dashboard_lead(http, to)
    summary = _summary(receiver.received, to, lead, report.stdout, started)
    say("one incident reached the webhook, signed:")
    print(json.dumps(summary, indent=2), flush=True)
    if not quick:
        say(f"open {to.sidecar}/ (log in with {API_KEY}); Ctrl-C, SIGTERM or SIGHUP stops the demo")
        up.wait()
    return 0


def _summary(
    received: list[dict[str, Any]], to: DemoHttp, lead: str, report: str, started: float
) -> dict[str, Any]:
    """What the demo shows at the end: the dashboard's headline, the incident and most severe
    drift alert the receiver got, and how many deliveries verified."""
    alerts = drift_alerts(received)
    alert = alerts[0]
    incident: dict[str, Any] = next(
        (
            r["body"]["incident"]
            for r in received
            if r["body"].get("alert") is alert and r["body"].get("incident")
        ),
        {},
    )
    return {
        "dashboard": f"{to.sidecar}/",
        "dashboard_says": lead,
        "headline": incident.get("headline"),
        "dashboard_leads_with_the_incident": lead == incident.get("headline"),
        "incident": incident.get("url"),
        "drift_notifications": len(alerts),
        "alert": alert.get("url"),
        "summary": alert.get("summary"),
        "drift_rules": sorted(
            {m["rule"] for m in incident.get("members", [])} or {a["rule"] for a in alerts}
        ),
        "report": report.strip(),
        "deliveries": len(received),
        "verified": sum(r["verified"] for r in received),
        "seconds": round(time.monotonic() - started, 1),
        "api_key": API_KEY,
        "admin_key": ADMIN_KEY,
    }
