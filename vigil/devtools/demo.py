"""`vigil demo [--quick]`: watch Vigil catch a drift in minutes, on this machine.

Starts a local webhook receiver, then engine and sidecar (`vigil up`) on a fresh SQLite file
under the demo directory; backdates a steady day of support traffic through the ingest API,
sends live requests through the OpenAI API, builds, validates and activates the baseline from
the dashboard's /baselines page, then a drift event arrives (a new kind of user and a prompt
change) and the drift window runs. It prints the dashboard and the signed alert the receiver got.
`--quick` sends less traffic and stops everything at the end (what the test runs).
"""

from __future__ import annotations

import html
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from vigil.devtools.demo_traffic import drift_event, steady
from vigil.devtools.stop_whole import stops_with_us

API_KEY = "vigil-demo-key-0123456789"
ADMIN_KEY = "vigil-demo-admin-0123456789"
OPERATOR_KEY = "vigil-demo-operator-0123456789"  # backdates the steady day, names its tenants
DRIFT_KINDS = ("prompt", "model", "eval", "persona")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Receiver:
    """A webhook receiver on 127.0.0.1 that checks each delivery's signature."""

    def __init__(self, secret: str) -> None:
        from alerts.signing import SignatureError, verify

        self.received: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
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


def drift_alerts(received: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The signed trigger notifications of drift alerts (not the monitor's own health), most
    severe first."""
    from alerts.proposal import SEVERITY_RANK

    found = [
        r["body"]["alert"]
        for r in received
        if r["verified"]
        and r["body"].get("event") == "trigger"
        and r["body"].get("alert", {}).get("kind") in DRIFT_KINDS
    ]
    return sorted(found, key=lambda a: -SEVERITY_RANK.get(a.get("severity"), -1))


def _wait(what: str, check, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except httpx.HTTPError:
            pass
        time.sleep(1.0)
    raise TimeoutError(f"vigil demo: {what} did not happen within {timeout_s:.0f}s")


def _embed_backlog(http: httpx.Client, sidecar: str, key: dict[str, str]) -> float:
    """The sidecar's own gauge: samples still waiting for the embed job."""
    for line in http.get(f"{sidecar}/metrics", headers=key).text.splitlines():
        if line.startswith('vigil_backlog_samples{job="embed"}'):
            return float(line.split()[-1])
    return float("inf")


_JOB_ROW = (
    r"<tr[^>]*><td>{id}</td><td>[^<]*</td><td><b>(\w+)</b></td>"
    r"<td>[^<]*</td><td>([^<]*)</td>"
)


def _job_outcome(
    http: httpx.Client, page: str, headers: dict[str, str], job_id: str, timeout: float = 600.0
) -> str:
    """The outcome of a baseline job started from the /baselines page, once it has finished
    (the page lists each job's state and outcome; the work runs off the request)."""
    row = re.compile(_JOB_ROW.format(id=re.escape(job_id)))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = http.get(page, headers=headers).text
        jobs_table = text.find('id="baseline-jobs"')  # the baselines table above has ids too
        found = row.search(text, jobs_table) if jobs_table >= 0 else None
        if found and found.group(1) in ("done", "failed"):
            return html.unescape(found.group(2))
        time.sleep(0.5)
    return f"job {job_id} refused: not finished after {timeout:.0f} s"


def _say(text: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {text}", flush=True)


def demo_command(args) -> int:
    quick = bool(getattr(args, "quick", False))
    workdir = Path(getattr(args, "dir", None) or "var/demo").resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / f"demo-{int(time.time())}.db"
    secret = secrets.token_hex(24)
    receiver = Receiver(secret)
    engine_port, sidecar_port = _free_port(), _free_port()
    engine, sidecar = f"http://127.0.0.1:{engine_port}", f"http://127.0.0.1:{sidecar_port}"
    env = {
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
        "VIGIL_PORT": str(engine_port),
        "VIGIL_SIDECAR_PORT": str(sidecar_port),
        "VIGIL_ENGINE_URL": engine,
        "VIGIL_PUBLIC_URL": sidecar,
        "VIGIL_SAMPLE_RATE": "1.0",
        "VIGIL_SEGMENT_MIN_PER_HOUR": "0",
        "VIGIL_EVAL_SHARE": "0.0",
        "VIGIL_EMBED_INTERVAL_S": "15",
        "VIGIL_DELIVERY_POLL_INTERVAL_S": "1",
        "VIGIL_KV_CACHE_MEMORY_MB": "128",
    }
    started = time.monotonic()
    _say(f"webhook receiver on {receiver.url}; starting engine ({engine}) and sidecar ({sidecar})")
    up = subprocess.Popen([sys.executable, "-m", "vigil.cli", "up"], env=env)
    key = {"Authorization": f"Bearer {API_KEY}"}
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    importer = {"Authorization": f"Bearer {OPERATOR_KEY}"}  # ingest: backdated, tenant-labelled
    try:
        with stops_with_us(up):  # SIGTERM and SIGHUP stop engine and sidecar as Ctrl-C does
            return _run(up, http_env=(engine, sidecar, key, admin, importer), env=env,
                        receiver=receiver, quick=quick, started=started)  # fmt: skip
    except KeyboardInterrupt as stopped:
        _say(f"{stopped or 'interrupted'}: engine and sidecar stopped")
        return 130
    finally:
        receiver.server.shutdown()


def _run(up, *, http_env, env, receiver, quick: bool, started: float) -> int:
    engine, sidecar, key, admin, importer = http_env
    with httpx.Client(timeout=600) as http:
        _wait("engine start", lambda: http.get(f"{engine}/health").status_code == 200, 600)
        _wait("sidecar start", lambda: http.get(f"{sidecar}/health").status_code == 200, 300)
        now = datetime.now(UTC)
        day_start, day_end = now - timedelta(hours=26), now - timedelta(hours=2)
        day = steady(day_start, day_end, 240 if quick else 960)
        for i in range(0, len(day), 200):
            http.post(
                f"{sidecar}/v1/ingest", json={"samples": day[i : i + 200]}, headers=importer
            ).raise_for_status()
        _say(
            f"backdated a steady day: {len(day)} samples, "
            f"{day_start:%m-%d %H:%M} → {day_end:%m-%d %H:%M} UTC"
        )
        for prompt in ["Where is my parcel 311?", "How do I return item 42?"][
            : 1 if quick else 2
        ] * (1 if quick else 4):
            http.post(
                f"{engine}/v1/chat/completions",
                headers=key,
                json={
                    "model": "SmolLM2-135M-Instruct",
                    "max_tokens": 8,
                    "temperature": 0,
                    "messages": [{"role": "user", "content": prompt}],
                },
            ).raise_for_status()
        _say("live requests answered by the engine (logged by its traffic sampler)")
        baseline_id = ""
        for step in ("build", "validate", "activate"):
            data = (
                {"start": day_start.isoformat(), "end": day_end.isoformat()}
                if step == "build"
                else {"id": baseline_id}
            )
            r = http.post(
                f"{sidecar}/baselines/{step}", data=data, headers=admin, follow_redirects=False
            )
            message = httpx.URL(r.headers.get("location", "")).params.get("message", r.text[:200])
            if r.status_code < 400 and (job := re.match(r"job (\d+) started", message)):
                message = _job_outcome(http, f"{sidecar}/baselines", admin, job.group(1))
            _say(f"baseline {step} (from the /baselines page): {message}")
            if "refused" in message or "rejected" in message or r.status_code >= 400:
                raise RuntimeError(f"baseline {step} failed: {message}")
            baseline_id = baseline_id or message.split("built baseline ")[-1].split()[0]
        event_end = datetime.now(UTC)
        event = drift_event(event_end - timedelta(minutes=50), event_end, 80 if quick else 200)
        event += steady(
            event_end - timedelta(minutes=50),
            event_end,
            40 if quick else 100,
            seed=3,
            tag="hour",
        )
        http.post(
            f"{sidecar}/v1/ingest", json={"samples": event}, headers=importer
        ).raise_for_status()
        _say(
            f"drift event: {len(event)} samples in the last hour "
            "(tenant newco on mobile, prompt v2)"
        )
        _wait(
            "embeddings of the new samples",
            lambda: _embed_backlog(http, sidecar, key) == 0,
            600,
        )
        report = subprocess.run(
            [sys.executable, "-m", "vigil.cli", "report", "--hours", "1"],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        _say(
            "drift window: "
            f"{report.stderr.strip().splitlines()[-1] if report.stderr.strip() else ''}"
        )
        if report.returncode != 0:
            raise RuntimeError(f"vigil report failed: {report.stderr[-2000:]}")
        _wait("a signed drift alert at the receiver", lambda: drift_alerts(receiver.received), 120)
        overview = http.get(f"{sidecar}/", headers=key).text
        found = re.search(r'<p class="lead"[^>]*>(.*?)</p>', overview, re.S)  # the headline
        lead = found.group(1) if found else ""
    alerts = drift_alerts(receiver.received)
    alert = alerts[0]
    incident: dict = next(
        (
            r["body"]["incident"]
            for r in receiver.received
            if r["body"].get("alert") is alert and r["body"].get("incident")
        ),
        {},
    )
    summary = {
        "dashboard": f"{sidecar}/",
        "dashboard_says": html.unescape(" ".join(re.sub(r"<[^>]+>", "", lead).split())),
        "headline": incident.get("headline"),
        "dashboard_leads_with_the_incident": html.unescape(
            " ".join(re.sub(r"<[^>]+>", "", lead).split())
        )
        == incident.get("headline"),
        "incident": incident.get("url"),
        "drift_notifications": len(alerts),
        "alert": alert.get("url"),
        "summary": alert.get("summary"),
        "drift_rules": sorted(
            {m["rule"] for m in incident.get("members", [])} or {a["rule"] for a in alerts}
        ),
        "report": report.stdout.strip(),
        "deliveries": len(receiver.received),
        "verified": sum(r["verified"] for r in receiver.received),
        "seconds": round(time.monotonic() - started, 1),
        "api_key": API_KEY,
        "admin_key": ADMIN_KEY,
    }
    _say("one incident reached the webhook, signed:")
    print(json.dumps(summary, indent=2), flush=True)
    if not quick:
        _say(f"open {sidecar}/ (log in with {API_KEY}); Ctrl-C, SIGTERM or SIGHUP stops the demo")
        up.wait()
    return 0
