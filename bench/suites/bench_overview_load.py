"""Server time of the overview and segment pages and every chart-data request they make, with
30 days of hourly drift runs, on SQLite and PostgreSQL.

    .venv/bin/python -m bench.suites.bench_overview_load [--hours 720] [--samples-per-hour 100] \
        [--repeat 7]
        [--backends sqlite postgresql] [--pg-url URL] [--json PATH] [--before PATH] [--no-write]

Seeds `vigil/devtools/seed_history.py` (hours x 45 drift results, samples with latencies, judge
scores on half of them), runs ANALYZE on PostgreSQL as autovacuum would, then requests each path
in-process (TestClient, no network) once the app's background import of the drift tests is done:
one warm-up, then the median and the slowest of `--repeat`.
Server time is measured inside the ASGI app, from the request's arrival to the last body byte.
`--json` keeps the figures; `--before` adds an earlier run's figures (e.g. the previous commit's
code, run from a checkout of it) as before columns. Exits 1 if a path's median misses 500 ms.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
from fastapi.testclient import TestClient
from sqlalchemy import insert, text
from sqlalchemy.engine import make_url

from bench.common.results_table import Table, write_results
from drift import registry
from sidecar.app import create_app
from storage.db import dispose_engines, session_factory
from storage.migrate import upgrade
from storage.models import DriftResult, DriftRun
from vigil.config import load_settings
from vigil.devtools.seed_history import seed_history

TARGET_MS = 500.0
API_KEY = "bench-overview-key"
# what the overview (/?range=30d) and a segment page (/segments/acme/web?range=30d) request; the
# seed labels drift segments "web" and "api", so the segment's drift series asks for "web"
PATHS = (
    "/?range=30d",
    "/api/v1/series?kind=drift&range=30d",
    "/api/v1/series?kind=eval&range=30d",
    "/api/v1/series?kind=traffic&range=30d",
    "/segments/acme/web?range=30d",
    "/api/v1/series?kind=drift&range=30d&segment=web",
    "/api/v1/series?kind=traffic&range=30d&tenant=acme&segment=web",
)


class ServerTimer:
    """ASGI wrapper: seconds from a request's arrival to its last body byte."""

    def __init__(self, app) -> None:
        self.app, self.last = app, 0.0

    async def __call__(self, scope, receive, send):
        started = time.perf_counter()

        async def timed_send(message):
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                self.last = time.perf_counter() - started

        await self.app(scope, receive, timed_send)


def seed(url: str, hours: int, samples_per_hour: int) -> None:
    upgrade(url)
    factory = session_factory(url)
    with factory() as s:
        seed_history(s, hours=hours, samples_per_hour=samples_per_hour)
        rng = random.Random(1)
        run_ids = [r for (r,) in s.query(DriftRun.id)]
        extra = [
            dict(
                run_id=rid,
                test="psi",
                feature=f"feature_{k}",
                segment=seg,
                statistic=rng.random() * 0.1,
                threshold=0.2,
                drifted=False,
                insufficient=False,
                detail={},
            )
            for rid in run_ids
            for k in range(12)
            for seg in ("*", "web", "api")
        ]
        s.execute(insert(DriftResult), extra)
        s.commit()
        if s.get_bind().dialect.name == "postgresql":
            s.execute(text("ANALYZE"))
            s.commit()


def measure(url: str, repeat: int, tmp: Path) -> dict[str, dict]:
    settings = load_settings(database_url=url, api_keys=[API_KEY], report_dir=tmp, journal_dir=tmp)
    timer = ServerTimer(create_app(settings, session_factory(url)))
    # the app imports the drift tests (and torch) in a thread; a server is past that long before
    # anyone opens a page, so wait for it (an import in progress elsewhere blocks until it is done)
    registry.all_tests()
    client = TestClient(timer)
    headers = {"Authorization": f"Bearer {API_KEY}"}
    out = {}
    for path in PATHS:
        assert client.get(path, headers=headers).status_code == 200, path
        times, size = [], 0
        for _ in range(repeat):
            r = client.get(path, headers=headers)
            assert r.status_code == 200, (path, r.status_code)
            times.append(timer.last * 1000)
            size = len(r.content)
        out[path] = {
            "median_ms": statistics.median(times),
            "max_ms": max(times),
            "kib": size / 1024,
        }
        print(
            f"{path}: median {out[path]['median_ms']:.0f} ms, slowest {out[path]['max_ms']:.0f} "
            "ms, "
            f"{out[path]['kib']:.0f} KiB",
            flush=True,
        )
    return out


def postgres_schema(pg_url: str) -> tuple[str, str, str]:
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = make_url(pg_url).set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = (
        make_url(pg_url)
        .update_query_dict({"options": f"-csearch_path={schema}"})
        .render_as_string(False)
    )
    return admin, schema, url


def run_backend(backend: str, args, tmp: Path) -> dict[str, dict]:
    admin = schema = None
    if backend == "sqlite":
        url = f"sqlite:///{tmp / 'bench.db'}"
    else:
        admin, schema, url = postgres_schema(args.pg_url)
    try:
        started = time.perf_counter()
        seed(url, args.hours, args.samples_per_hour)
        print(f"{backend}: seeded in {time.perf_counter() - started:.1f} s", flush=True)
        return measure(url, args.repeat, tmp)
    finally:
        dispose_engines()
        if schema is not None:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hours", type=int, default=720)
    parser.add_argument("--samples-per-hour", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--backends", nargs="+", default=["sqlite", "postgresql"], choices=["sqlite", "postgresql"]
    )
    parser.add_argument("--pg-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument(
        "--before", type=Path, help="figures of an earlier run (--json) to compare with"
    )
    parser.add_argument(
        "--no-write", action="store_true", help="do not add a section to bench/results"
    )
    args = parser.parse_args()

    results: dict[str, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory() as tmpdir:
        for backend in args.backends:
            results[backend] = run_backend(backend, args, Path(tmpdir))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    before = json.loads(args.before.read_text()) if args.before else {}
    table = Table(
        f"server time, {args.hours} hourly runs, {args.samples_per_hour} samples an hour "
        f"(median and slowest of {args.repeat})",
        ["backend", "path", "before median ms", "before KiB", "median ms", "slowest ms", "KiB"],
    )
    missed = []
    for backend, paths in results.items():
        for path, r in paths.items():
            old = before.get(backend, {}).get(path)
            table.add(
                backend,
                f"`{path}`",
                f"{old['median_ms']:.0f}" if old else None,
                f"{old['kib']:.0f}" if old else None,
                f"{r['median_ms']:.0f}",
                f"{r['max_ms']:.0f}",
                f"{r['kib']:.0f}",
            )
            if r["median_ms"] >= TARGET_MS:
                missed.append(f"{backend} {path}")
    notes = [
        f"target: every path under {TARGET_MS:.0f} ms server time; "
        + (f"missed by {', '.join(missed)}" if missed else "all meet it")
    ]
    if before:
        notes.append(
            f"before: figures from {args.before.name}, the same bench run on the code before this "
            "change"
        )
    if not args.no_write:
        write_results("overview_load", [table], notes)
    print(notes[0])
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
