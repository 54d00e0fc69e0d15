"""The sidecar's drift window read at 10k, 100k and 1M samples in one hour, before and after the
hour bucket, on SQLite and PostgreSQL.

One hour is filled in steps (10k, then up to 100k, then up to 1M samples, timestamps uniform over
the hour, eight segments of skewed sizes, texts of chat length from a pool of made ones); after each
step the planner statistics are refreshed (ANALYZE; VACUUM ANALYZE on PostgreSQL, as autovacuum
would) and the window is read as the drift job reads it (`read_window` with the row cap and the
embedded-row cap, no `extra`) and as it was read before (bench/targets/window_read_before.py),
alternately, `--repeat` times each; the median is reported with the rows kept. The 10k -> 1M ratio
is the figure that should stay small. Results go to bench/results/scale.md.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import psycopg
from sqlalchemy import insert
from sqlalchemy.engine import make_url

from bench.common.results_table import Table, write_results
from bench.targets.window_read_before import read_window_before
from bench.workloads.scale_texts import pairs
from storage.db import dispose_engines, get_engine, session_factory
from storage.migrate import upgrade
from storage.models import Sample
from storage.repositories.samples import read_window

T0 = datetime(2026, 11, 30, 10, tzinfo=UTC)
HOUR = timedelta(hours=1)
SEGMENTS = ("billing", "deploy", "latency", "login", "export", "quota", "webhook", "upgrade")
SHARES = np.array([0.40, 0.20, 0.12, 0.10, 0.08, 0.05, 0.04, 0.01])
MODEL = "all-MiniLM-L6-v2"
CHUNK = 20_000


def fill(url: str, first: int, last: int, texts: list[tuple[str, str, str]]) -> float:
    """Insert samples first..last-1 into the hour; the insert's seconds."""
    rng = np.random.default_rng(first)
    engine = get_engine(url)
    t = time.perf_counter()
    for lo in range(first, last, CHUNK):
        n = min(CHUNK, last - lo)
        micros = rng.integers(0, 3_600_000_000, n)
        segs = rng.choice(len(SEGMENTS), n, p=SHARES)
        rows = []
        for k in range(n):
            _, prompt, response = texts[(lo + k) % len(texts)]
            rows.append(
                {"id": f"w{lo + k}", "timestamp": T0 + timedelta(microseconds=int(micros[k])),
                 "segment": SEGMENTS[segs[k]], "prompt": prompt, "response": response,
                 "sample_weight": 1.0, "source": "engine", "latency_ms": float(k % 900)}
            )  # fmt: skip
        with engine.begin() as conn:
            conn.execute(insert(Sample), rows)
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                "VACUUM ANALYZE samples"
            )
        else:
            conn.exec_driver_sql("ANALYZE")
            conn.commit()
    return time.perf_counter() - t


def timed(url: str, args, cap: int, before: bool) -> tuple[float, int]:
    factory = session_factory(url)
    kwargs = {"embedding_model": MODEL, "max_rows": cap,
              "max_embedded_rows": args.embedded_rows, "min_per_segment": args.floor}  # fmt: skip
    t = time.perf_counter()
    with factory() as s:
        if before:
            records = read_window_before(s, T0, T0 + HOUR, **kwargs)
        else:
            records = read_window(s, T0, T0 + HOUR, with_extra=False, **kwargs).records
    return time.perf_counter() - t, len(records)


def run_backend(url: str, args, table: Table, engine_name: str) -> dict[tuple[int, int], tuple]:
    """{(cap, N): (before s, after s)}."""
    upgrade(url)
    texts = pairs(7, 4000)
    done, out = 0, {}
    for n in args.sizes:
        insert_s = fill(url, done, n, texts)
        done = n
        for cap in args.caps:
            times: dict[bool, list[float]] = {True: [], False: []}
            kept = 0
            for _ in range(args.repeat):
                for before in (True, False):
                    seconds, kept = timed(url, args, cap, before)
                    times[before].append(seconds)
            b, a = statistics.median(times[True]), statistics.median(times[False])
            out[cap, n] = (b, a)
            line = table.add(engine_name, f"{cap:,}", f"{n:,}", f"{kept:,}", f"{insert_s:.0f}",
                             f"{b:.3f}", f"{a:.3f}", f"{b / a:.1f}x")  # fmt: skip
            print(line, flush=True)
    return out


def pg_schema(pg_url: str) -> tuple[str, str, str]:
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = make_url(pg_url).set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = make_url(pg_url).update_query_dict({"options": f"-csearch_path={schema}"})
    return schema, admin, url.render_as_string(False)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument(
        "--caps", default="50000,5000", help="the window's row caps (the sidecar's default first)"
    )
    parser.add_argument("--embedded-rows", type=int, default=4_000)
    parser.add_argument("--floor", type=int, default=200, help="rows kept per segment at least")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--pg-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    args.sizes = [int(x) for x in args.sizes.split(",")]
    args.caps = [int(x) for x in args.caps.split(",")]
    table = Table(
        f"window read of one hour of N samples, vectors for {args.embedded_rows:,} rows "
        f"(fewer when the cap is smaller), median of {args.repeat}",
        ["backend", "cap", "N", "rows kept", "insert s", "before s", "after s", "before/after"],
    )
    print(table.header(), flush=True)
    ratios = []
    for backend in args.backends.split(","):
        if backend == "sqlite":
            with tempfile.TemporaryDirectory() as tmp:
                got = run_backend(f"sqlite:///{Path(tmp) / 'w.db'}", args, table, backend)
                dispose_engines()
        else:
            schema, admin, url = pg_schema(args.pg_url)
            try:
                got = run_backend(url, args, table, backend)
            finally:
                dispose_engines()
                with psycopg.connect(admin, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        lo, hi = min(args.sizes), max(args.sizes)
        for cap in args.caps:
            b = got[cap, hi][0] / got[cap, lo][0]
            a = got[cap, hi][1] / got[cap, lo][1]
            ratio = (
                f"{backend}, cap {cap:,}: {hi:,} / {lo:,} samples, before {b:.1f}x, after {a:.1f}x"
            )
            print(ratio, flush=True)
            ratios.append(ratio)
    notes = [
        "read time ratio of the largest to the smallest hour: " + "; ".join(ratios),
        "before: the timestamp range and one OR over the kept parts"
        " (bench/targets/window_read_before.py)"
        ", run against the same tables (the hour index present, unused by it)",
        "no vectors or eval scores are stored: both reads look them up for the same kept ids",
    ]
    write_results("scale", [table], notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
