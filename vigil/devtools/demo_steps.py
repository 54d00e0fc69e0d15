"""The steps of `vigil demo` (vigil/devtools/demo.py), each against the running engine and
sidecar: the steady day, live requests, the baseline from the /baselines page, the drift event,
the drift window, and the summary of what reached the webhook."""

from __future__ import annotations

import html
import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from vigil.devtools.demo_traffic import drift_event, steady

DRIFT_KINDS = ("prompt", "model", "eval", "persona")
_JOB_ROW = (
    r"<tr[^>]*><td>{id}</td><td>[^<]*</td><td><b>(\w+)</b></td>"
    r"<td>[^<]*</td><td>([^<]*)</td>"
)


@dataclass(frozen=True)
class DemoHttp:
    """Where the demo's engine and sidecar listen, and the headers of its three keys."""

    engine: str
    sidecar: str
    key: dict[str, str]  # the API key: chat completions, pages, /metrics
    admin: dict[str, str]  # the /baselines page's build, validate, activate
    importer: dict[str, str]  # ingest: backdated, tenant-labelled


def say(text: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {text}", flush=True)


def wait_for(what: str, check: Callable[[], Any], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except httpx.HTTPError:
            pass
        time.sleep(1.0)
    raise TimeoutError(f"vigil demo: {what} did not happen within {timeout_s:.0f}s")


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


def embed_backlog(http: httpx.Client, sidecar: str, key: dict[str, str]) -> float:
    """The sidecar's own gauge: samples still waiting for the embed job."""
    for line in http.get(f"{sidecar}/metrics", headers=key).text.splitlines():
        if line.startswith('vigil_backlog_samples{job="embed"}'):
            return float(line.split()[-1])
    return float("inf")


def job_outcome(
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


def ingest_steady_day(http: httpx.Client, to: DemoHttp, quick: bool) -> tuple[datetime, datetime]:
    """A steady day of support traffic, backdated through the ingest API; its [start, end)."""
    now = datetime.now(UTC)
    day_start, day_end = now - timedelta(hours=26), now - timedelta(hours=2)
    day = steady(day_start, day_end, 240 if quick else 960)
    for i in range(0, len(day), 200):
        http.post(
            f"{to.sidecar}/v1/ingest", json={"samples": day[i : i + 200]}, headers=to.importer
        ).raise_for_status()
    say(
        f"backdated a steady day: {len(day)} samples, "
        f"{day_start:%m-%d %H:%M} → {day_end:%m-%d %H:%M} UTC"
    )
    return day_start, day_end


def ask_engine(http: httpx.Client, to: DemoHttp, quick: bool) -> None:
    """Live requests through the engine's OpenAI API, which its traffic sampler logs."""
    prompts = ["Where is my parcel 311?", "How do I return item 42?"][: 1 if quick else 2]
    for prompt in prompts * (1 if quick else 4):
        http.post(
            f"{to.engine}/v1/chat/completions",
            headers=to.key,
            json={
                "model": "SmolLM2-135M-Instruct",
                "max_tokens": 8,
                "temperature": 0,
                "messages": [{"role": "user", "content": prompt}],
            },
        ).raise_for_status()
    say("live requests answered by the engine (logged by its traffic sampler)")


def baseline_from_page(http: httpx.Client, to: DemoHttp, start: datetime, end: datetime) -> None:
    """Build, validate and activate the baseline of [start, end) from the /baselines page,
    waiting for each background job's outcome before the next step."""
    baseline_id = ""
    for step in ("build", "validate", "activate"):
        data = (
            {"start": start.isoformat(), "end": end.isoformat()}
            if step == "build"
            else {"id": baseline_id}
        )
        r = http.post(
            f"{to.sidecar}/baselines/{step}", data=data, headers=to.admin, follow_redirects=False
        )
        message = httpx.URL(r.headers.get("location", "")).params.get("message", r.text[:200])
        if r.status_code < 400 and (job := re.match(r"job (\d+) started", message)):
            message = job_outcome(http, f"{to.sidecar}/baselines", to.admin, job.group(1))
        say(f"baseline {step} (from the /baselines page): {message}")
        if "refused" in message or "rejected" in message or r.status_code >= 400:
            raise RuntimeError(f"baseline {step} failed: {message}")
        baseline_id = baseline_id or message.split("built baseline ")[-1].split()[0]


def ingest_drift_event(http: httpx.Client, to: DemoHttp, quick: bool) -> None:
    """The last hour: a new kind of user and a prompt change, beside some steady traffic;
    returns once the sidecar has embedded it."""
    end = datetime.now(UTC)
    event = drift_event(end - timedelta(minutes=50), end, 80 if quick else 200)
    event += steady(end - timedelta(minutes=50), end, 40 if quick else 100, seed=3, tag="hour")
    http.post(
        f"{to.sidecar}/v1/ingest", json={"samples": event}, headers=to.importer
    ).raise_for_status()
    say(f"drift event: {len(event)} samples in the last hour (tenant newco on mobile, prompt v2)")
    wait_for(
        "embeddings of the new samples",
        lambda: embed_backlog(http, to.sidecar, to.key) == 0,
        600,
    )


def run_drift_window(env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """`vigil report --hours 1`: the drift window over the last hour, as the scheduler runs it."""
    report = subprocess.run(
        [sys.executable, "-m", "vigil.cli", "report", "--hours", "1"],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=900,
    )
    said = report.stderr.strip()
    say(f"drift window: {said.splitlines()[-1] if said else ''}")
    if report.returncode != 0:
        raise RuntimeError(f"vigil report failed: {report.stderr[-2000:]}")
    return report


def dashboard_lead(http: httpx.Client, to: DemoHttp) -> str:
    """The overview page's headline, as text."""
    overview = http.get(f"{to.sidecar}/", headers=to.key).text
    found = re.search(r'<p class="lead"[^>]*>(.*?)</p>', overview, re.S)
    lead = found.group(1) if found else ""
    return html.unescape(" ".join(re.sub(r"<[^>]+>", "", lead).split()))
