"""A busy hour at scale on PostgreSQL: N samples through the ingest API within one hour's
timestamps, then embed (the rows the capped window reads) -> drift window -> report.

    .venv/bin/python -m bench.bench_scale [--sizes 10000,100000] [--cap 5000] [--threads 1]

Per size, measured in one run on one schema: ingest rows/s (HTTP POST /v1/ingest, 1,000 records
a request, two client threads, the sidecar app in its own process); the embed job's time and
texts/s for the window's read rows; the naive peer, embedding every sample: its unread rows
are embedded too, up to --naive-max samples timed, the rest projected at that measured rate;
the window (capped load + drift tests) and the report (Evidently page + HTML); the process's
peak RSS. A baseline hour (--baseline samples) is built, validated and activated first (not timed).
Texts: bench/scale_texts.py (made text of realistic length; no dataset installs offline)."""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np
import psycopg
from sqlalchemy.engine import make_url

import drift.run
import sidecar.jobs.drift as drift_job
import sidecar.jobs.embed as embed_job
from bench.results_table import Table, write_results
from bench.scale_texts import pairs
from sidecar.baselines import (
    activate_baseline,
    build_baseline_from_window,
    validate_stored_baseline,
)
from sidecar.jobs.embed import run_embed_job
from storage.db import dispose_engines, session_factory
from storage.migrate import upgrade
from storage.repositories.samples import insert_samples
from vigil.config import load_settings
from vigil.config_tenancy import DEFAULT_DEV_OPERATOR_KEY

HOUR = timedelta(hours=1)
SEGMENTS = {"web": 0.45, "api": 0.25, "mobile": 0.15, "partner": 0.10, "batch": 0.04, "rare": 0.01}
BATCH = 1000


def records(tag: str, start: datetime, first: int, count: int, total: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    names, shares = list(SEGMENTS), np.array(list(SEGMENTS.values()))
    segs = rng.choice(len(names), count, p=shares / shares.sum())
    out = []
    for k, (topic, prompt, response) in enumerate(pairs(seed, count)):
        i = first + k
        out.append({"id": f"{tag}-{i:07d}",
                    "timestamp": (start + HOUR * (i + 0.5) / total).isoformat(),
                    "tenant": f"t{i % 5}", "segment": names[segs[k]], "prompt_version": "v1",
                    "model_version": "m1", "prompt": prompt, "response": response,
                    "prompt_tokens": int(len(prompt.split()) * 1.3),
                    "completion_tokens": int(len(response.split()) * 1.3),
                    "finish_reason": "stop", "latency_ms": float(rng.gamma(4.0, 200.0)),
                    "ttft_ms": float(rng.gamma(3.0, 40.0)), "tools": [topic]})  # fmt: skip
    return out


def ingest(base_url: str, tag: str, start: datetime, n: int) -> float:
    """Seconds to POST n records in batches from two threads."""
    chunks = [(lo, min(BATCH, n - lo)) for lo in range(0, n, BATCH)]
    errors: list[str] = []

    def worker(part: list[tuple[int, int]]) -> None:
        with httpx.Client(
            base_url=base_url,
            timeout=120,
            headers={"Authorization": f"Bearer {DEFAULT_DEV_OPERATOR_KEY}"},
        ) as client:
            for lo, count in part:
                body = json.dumps({"samples": records(tag, start, lo, count, n, seed=lo)})
                r = client.post(
                    "/v1/ingest", content=body, headers={"Content-Type": "application/json"}
                )
                if r.status_code != 200 or r.json().get("inserted") != count:
                    errors.append(f"{r.status_code} {r.text[:200]}")

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(chunks[i::2],)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"ingest failed: {errors[0]}")
    return time.perf_counter() - started


@contextmanager
def server(url: str, port: int):
    proc = subprocess.Popen([sys.executable, "-m", "bench.scale_server", url, str(port)])
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code < 500:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the sidecar app did not start")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(30)


class Timers:
    """Wall time spent inside some functions of the drift job (wrapped in place)."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    def wrap(self, owner, name: str, label: str) -> None:
        inner = getattr(owner, name)

        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.spent[label] = self.spent.get(label, 0.0) + time.perf_counter() - t

        setattr(owner, name, timed)


def embed_until_done(settings, factory, windows, now, unread: bool, max_samples: int | None = None):
    """(samples, texts, seconds) of embed-job runs until nothing is waiting (or max_samples)."""
    samples = texts = 0
    full = embed_job.MAX_BATCHES_PER_RUN
    if max_samples is not None:  # one run holds whole batches: stop near max_samples
        embed_job.MAX_BATCHES_PER_RUN = max(1, max_samples // embed_job.BATCH)
    started = time.perf_counter()
    try:
        while max_samples is None or samples < max_samples:
            r = run_embed_job(settings, factory, now, windows=windows, unread=unread)
            samples += r.samples
            texts += r.vectors
            if r.samples == 0 or (not unread and r.waiting == 0):
                break
    finally:
        embed_job.MAX_BATCHES_PER_RUN = full
    return samples, texts, time.perf_counter() - started


def say(what: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {what}", file=sys.stderr, flush=True)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(args, url: str, report_dir: Path) -> list[dict]:
    settings = load_settings(
        database_url=url,
        drift_max_window_rows=args.cap,
        embed_device="cpu",
        embed_threads=args.threads,
        report_dir=report_dir,
        drift_interval_s=3600,
    )
    factory = session_factory(url)
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    hours = [now - HOUR * (len(args.sizes) + 1 - k) for k in range(len(args.sizes) + 1)]
    base = hours[0] - HOUR
    with factory() as s:
        insert_samples(
            s, records("base", base, 0, args.baseline, args.baseline, seed=99), now=base + HOUR
        )
        s.commit()
    say(f"baseline: {args.baseline:,} samples, embedding and building")
    built = build_baseline_from_window(settings, factory, base, base + HOUR, now=now)
    say("baseline: validating")
    validate_stored_baseline(settings, factory, built.baseline_id, now=now)
    activate_baseline(factory, built.baseline_id, now=now)
    timers = Timers()
    timers.wrap(drift_job, "fetch_window", "load")
    timers.wrap(drift.run, "run_drift", "tests")
    timers.wrap(drift_job, "evidently_part", "report")
    timers.wrap(drift_job, "write_run_report", "report")
    rows = []
    with server(url, args.port) as base_url:
        for n, start in zip(args.sizes, hours[1:], strict=True):
            window = [(start, start + HOUR)]
            say(f"{n:,}: ingest")
            ingest_s = ingest(base_url, f"n{n}", start, n)
            say(f"{n:,}: ingested in {ingest_s:.1f} s; embedding the read rows")
            read_samples, read_texts, read_s = embed_until_done(
                settings, factory, window, now, unread=False
            )
            say(f"{n:,}: {read_samples:,} read rows embedded in {read_s:.1f} s; the naive peer")
            naive_samples, naive_texts, naive_s = embed_until_done(
                settings, factory, [], now, unread=True, max_samples=args.naive_max
            )
            rest = n - read_samples - naive_samples
            naive_total_s = (
                read_s + naive_s + (rest * naive_s / naive_samples if naive_samples else 0.0)
            )
            say(f"{n:,}: the window")
            timers.spent.clear()
            t = time.perf_counter()
            outcome = drift_job.run_window(
                settings,
                factory,
                start,
                start + HOUR,
                now=now,
                advance_cursor=False,
                resolve_absent=False,
            )
            window_s = time.perf_counter() - t
            row = {"n": n, "ingest_rows_s": n / ingest_s, "read_samples": read_samples,
                   "embed_s": read_s, "embed_texts_s": read_texts / read_s if read_s else None,
                   "naive_s": naive_total_s, "naive_measured": naive_samples,
                   "naive_projected": rest, "load_s": timers.spent.get("load", 0.0),
                   "tests_s": timers.spent.get("tests", 0.0),
                   "report_s": timers.spent.get("report", 0.0), "window_total_s": window_s,
                   "rows_read": outcome.num_samples, "rss_mb": peak_rss_mb()}  # fmt: skip
            print(json.dumps(row), flush=True)
            rows.append(row)
    dispose_engines(url)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument(
        "--cap", type=int, default=5000, help="the window's row cap (VIGIL_DRIFT_MAX_WINDOW_ROWS)"
    )
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads of the embedder")
    ap.add_argument(
        "--naive-max", type=int, default=512, help="unread samples embedded for the naive peer"
    )
    ap.add_argument("--baseline", type=int, default=2000, help="samples in the baseline hour")
    ap.add_argument("--port", type=int, default=18731)
    ap.add_argument("--pg-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    args = ap.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = make_url(args.pg_url).set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = (
        make_url(args.pg_url)
        .update_query_dict({"options": f"-csearch_path={schema}"})
        .render_as_string(False)
    )
    try:
        upgrade(url)
        with tempfile.TemporaryDirectory() as tmp:
            rows = run(args, url, Path(tmp))
    finally:
        dispose_engines()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    table = Table(f"one hour of N samples on PostgreSQL, window cap {args.cap:,} rows, "
                  f"embedder on CPU ({args.threads} thread)",
                  ["N", "ingest rows/s", "embedded (read rows)", "embed s",
                  "embed texts/s", "naive embed s", "naive/read", "window load s", "drift tests s",
                  "report s", "peak RSS MB"])  # fmt: skip
    for r in rows:
        table.add(
            f"{r['n']:,}",
            f"{r['ingest_rows_s']:,.0f}",
            f"{r['read_samples']:,}",
            f"{r['embed_s']:,.1f}",
            f"{r['embed_texts_s']:,.0f}",
            f"{r['naive_s']:,.0f}",
            f"{r['naive_s'] / r['embed_s']:.1f}x",
            f"{r['load_s']:.2f}",
            f"{r['tests_s']:.1f}",
            f"{r['report_s']:.1f}",
            f"{r['rss_mb']:,.0f}",
        )
    timed = ", ".join(f"{r['naive_measured']:,} of {r['n']:,}" for r in rows)
    notes = [
        f"naive: every sample embedded; of the unread samples {timed} were timed, the rest "
        "projected at that rate; the machine is 2 cores shared with other work"
    ]
    write_results("scale", [table], notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
