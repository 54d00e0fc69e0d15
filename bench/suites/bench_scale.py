"""A busy hour at scale on PostgreSQL: N samples through the ingest API within one hour's
timestamps, then embed (the rows the capped window reads) -> drift window -> report.

    .venv/bin/python -m bench.suites.bench_scale [--sizes 10000,100000] [--embed-device cpu|cuda]
        [--db-url sqlite|postgresql+psycopg://...] [--cap N] [--embedded-cap auto|N]

The caps default to the sidecar's (Settings.drift_max_window_rows, drift_max_embedded_rows:
auto sizes the embedded subset to the embedder's device). Per size, measured in one run on one
schema (or one SQLite file): ingest rows/s (HTTP POST /v1/ingest, 1,000 records
a request, two client threads, the sidecar app in its own process); the embed job's time and
texts/s for the window's read rows; the naive peer, embedding every sample: its unread rows
are embedded too, up to --naive-max samples timed, the rest projected at that measured rate;
the window (capped load + drift tests) and the report (Evidently page + HTML); the hour end to
end (ingest + embed + window, the naive peer left out); the process's peak RSS. A baseline hour
(--baseline samples) is built, validated and activated first (not timed).
Texts: bench/workloads/scale_texts.py (made text of realistic length; no dataset installs
offline)."""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import drift.run
import sidecar.jobs.drift as drift_job
import sidecar.jobs.embed as embed_job
from bench.common.results_table import Table, write_results
from bench.targets.scale_ingest import (
    ANALYZE_EVERY,
    HOUR,
    analyzer,
    database,
    ingest,
    records,
    server,
)
from sidecar.embed_device import resolve_device
from sidecar.embedded_rows import embedded_rows_cap
from sidecar.jobs.baselines import (
    activate_baseline,
    build_baseline_from_window,
    validate_stored_baseline,
)
from sidecar.jobs.embed import run_embed_job
from storage.db import dispose_engines, session_factory
from storage.repositories.samples import insert_samples
from vigil.config import Settings, load_settings


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
                say(f"  {label} done in {time.perf_counter() - t:.1f} s")

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
    print(
        f"{time.strftime('%H:%M:%S')} [rss {rss_now_mb():,.0f} MB, peak {peak_rss_mb():,.0f}]"
        f" {what}",
        file=sys.stderr,
        flush=True,
    )


def rss_now_mb() -> float:
    """The process's resident memory now (Linux /proc; 0 elsewhere), beside the peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(args, url: str, report_dir: Path) -> list[dict]:
    settings = load_settings(
        database_url=url,
        drift_max_window_rows=args.cap,
        drift_max_embedded_rows=args.embedded_cap,
        embed_device=args.embed_device,
        embed_threads=args.threads,
        report_dir=report_dir,
        drift_interval_s=3600,
    )
    args.embedded_rows = embedded_rows_cap(settings)
    say(f"window cap {args.cap:,} rows, vectors for {args.embedded_rows:,} of them")
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
    timers.wrap(drift_job, "read_window", "load")
    timers.wrap(drift.run, "run_drift", "tests")
    timers.wrap(drift_job, "evidently_part", "report")
    timers.wrap(drift_job, "write_run_report", "report")
    rows = []
    analyze = analyzer(url)
    args.analyzed = analyze is not None
    if analyze is not None:
        say(f"autovacuum is off: ANALYZE samples after every {ANALYZE_EVERY:,} rows ingested")
    with server(url, args.port) as base_url:
        for n, start in zip(args.sizes, hours[1:], strict=True):
            window = [(start, start + HOUR)]
            say(f"{n:,}: ingest")
            ingest_s = ingest(base_url, f"n{n}", start, n, analyze=analyze)
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
            say(f"{n:,}: window and report in {window_s:.1f} s")
            row = {"n": n, "ingest_rows_s": n / ingest_s, "read_samples": read_samples,
                   "embed_s": read_s, "embed_texts_s": read_texts / read_s if read_s else None,
                   "naive_s": naive_total_s, "naive_measured": naive_samples,
                   "naive_projected": rest, "load_s": timers.spent.get("load", 0.0),
                   "tests_s": timers.spent.get("tests", 0.0),
                   "report_s": timers.spent.get("report", 0.0), "window_total_s": window_s,
                   "rows_read": outcome.num_samples, "rss_mb": peak_rss_mb(),
                   "end_to_end_s": ingest_s + read_s + window_s}  # fmt: skip
            print(json.dumps(row), flush=True)
            rows.append(row)
    dispose_engines(url)
    return rows


def _defaults() -> dict:
    fields = Settings.model_fields
    return {
        "cap": fields["drift_max_window_rows"].default,
        "embedded_cap": fields["drift_max_embedded_rows"].default,
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    defaults = _defaults()
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument(
        "--cap",
        type=int,
        default=defaults["cap"],
        help="the window's row cap (VIGIL_DRIFT_MAX_WINDOW_ROWS; default the sidecar's)",
    )
    ap.add_argument(
        "--embedded-cap",
        default=str(defaults["embedded_cap"]),
        help="rows whose vectors the embedding tests read (VIGIL_DRIFT_MAX_EMBEDDED_ROWS: auto "
        "or a number; default the sidecar's)",
    )
    ap.add_argument("--embed-device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads of the embedder")
    ap.add_argument(
        "--naive-max", type=int, default=512, help="unread samples embedded for the naive peer"
    )
    ap.add_argument("--baseline", type=int, default=2000, help="samples in the baseline hour")
    ap.add_argument("--port", type=int, default=18731)
    ap.add_argument(
        "--db-url",
        "--pg-url",
        default="postgresql+psycopg://postgres@127.0.0.1:5432/test",
        help="a PostgreSQL URL (the run uses a new schema in it, dropped after) or `sqlite`",
    )
    args = ap.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    if args.embedded_cap != "auto":
        args.embedded_cap = int(args.embedded_cap)
    with database(args.db_url) as (url, engine), tempfile.TemporaryDirectory() as tmp:
        rows = run(args, url, Path(tmp))
    device = resolve_device(args.embed_device)
    threads = f", {args.threads} threads" if args.threads and device == "cpu" else ""
    table = Table(f"one hour of N samples on {engine}, window cap {args.cap:,} rows, vectors for "
                  f"{args.embedded_rows:,} of them, embedder on {device.upper()}{threads}",
                  ["N", "ingest rows/s", "embedded rows", "embed s",
                  "embed texts/s", "naive embed s", "naive/read", "window load s", "drift tests s",
                  "report s", "end to end min", "peak RSS MB"])  # fmt: skip
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
            f"{r['end_to_end_s'] / 60:.1f}",
            f"{r['rss_mb']:,.0f}",
        )
    timed = ", ".join(f"{r['naive_measured']:,} of {r['n']:,}" for r in rows)
    notes = [
        f"naive: every sample embedded; of the unread samples {timed} were timed, the rest "
        "projected at that rate",
        "end to end: ingest + embedding the rows the window's tests read + the window (load, "
        "tests, report); the baseline hour and the naive peer are not in it; peak RSS is the "
        "benchmark's process (embedder, window, report), the ingest server runs in its own",
    ]
    if args.analyzed:
        notes.append(
            f"this PostgreSQL runs with autovacuum off: the ingest ran ANALYZE samples after "
            f"every {ANALYZE_EVERY:,} rows (in the ingest time), as autovacuum would as the "
            "table grows; without planner statistics the duplicate check per request becomes a "
            "sequential scan"
        )
    write_results("scale", [table], notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
