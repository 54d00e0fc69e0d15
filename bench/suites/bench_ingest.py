"""Ingest throughput: batched writes vs one commit per row, on SQLite and PostgreSQL.

    .venv/bin/python -m bench.suites.bench_ingest [--rows 20000] [--single-rows 2000] \
        [--pg-url URL] [--no-pg]

Three paths per backend, measured in the same run on the same schema:
  writer   SampleWriter.submit() from the caller, background batches (the engine's real path)
  bulk     insert_samples() with one commit per batch of 500
  single   insert_samples() + commit for every row (the peer the ratio is against)
Exits 1 if the batched writer path stays under 5,000 rows/s on SQLite (the acceptance bar).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from bench.common.results_table import Table, write_results
from storage.db import dispose_engines, session_scope
from storage.migrate import upgrade
from storage.repositories import count_samples, insert_samples
from storage.writer import SampleWriter

SQLITE_TARGET = 5000.0
T0 = datetime(2026, 11, 29, tzinfo=UTC)


def make_records(n: int, tag: str) -> list[dict]:
    """Engine-like records: ~300-char prompt, ~200-char response, every numeric field."""
    return [
        {"id": str(uuid.uuid4()), "timestamp": (T0 + timedelta(milliseconds=i)).isoformat(),
         "tenant": f"tenant-{i % 7}", "segment": f"{tag}-{i % 5}", "prompt_version": "v3",
         "model_version": "smollm2-135m-instruct-q4_1",
         "prompt": f"<|im_start|>user\nQuestion {i}: " + "explain the paged KV cache " * 10,
         "response": f"Answer {i}: " + "blocks are allocated on demand " * 6,
         "prompt_tokens": 80 + i % 50, "completion_tokens": 40 + i % 30, "finish_reason": "stop",
         "ttft_ms": 12.5 + i % 9, "tpot_ms": 7.1, "latency_ms": 300.0 + i % 100, "queue_ms": 1.0,
         "mean_logprob": -0.8, "mean_entropy": 1.3, "tools": ["search"] if i % 4 == 0 else [],
         "sample_weight": 10.0, "request_region": "eu"}
        for i in range(n)
    ]  # fmt: skip


def bench_writer(url: str, records: list[dict], journal: Path) -> float:
    writer = SampleWriter(
        url, journal, batch_size=500, flush_interval_s=0.05, queue_size=len(records) + 1
    )
    start = time.perf_counter()
    for record in records:
        writer.submit(record)
    assert writer.close(timeout=300), "writer did not finish"
    elapsed = time.perf_counter() - start
    assert writer.written == len(records) and writer.journaled == 0, (
        writer.written,
        writer.last_error,
    )
    return len(records) / elapsed


def bench_bulk(url: str, records: list[dict], batch: int = 500) -> float:
    start = time.perf_counter()
    for i in range(0, len(records), batch):
        with session_scope(url) as s:
            insert_samples(s, records[i : i + batch])
    return len(records) / (time.perf_counter() - start)


def bench_single(url: str, records: list[dict]) -> float:
    start = time.perf_counter()
    for record in records:
        with session_scope(url) as s:
            insert_samples(s, [record])
    return len(records) / (time.perf_counter() - start)


def run_backend(name: str, url: str, rows: int, single_rows: int, tmp: Path) -> dict[str, float]:
    upgrade(url)
    rates = {
        "writer": bench_writer(url, make_records(rows, "w"), tmp / f"journal-{name}"),
        "bulk": bench_bulk(url, make_records(rows, "b")),
        "single": bench_single(url, make_records(single_rows, "s")),
    }
    with session_scope(url) as s:
        assert count_samples(s) == 2 * rows + single_rows
    dispose_engines(url)
    return rates


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--single-rows", type=int, default=2_000)
    parser.add_argument("--pg-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--no-pg", action="store_true")
    args = parser.parse_args()

    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        results["sqlite"] = run_backend(
            "sqlite", f"sqlite:///{tmp / 'bench.db'}", args.rows, args.single_rows, tmp
        )
        if not args.no_pg:
            schema = f"bench_{uuid.uuid4().hex[:10]}"
            admin = make_url(args.pg_url).set(drivername="postgresql").render_as_string(False)
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA "{schema}"')
            url = make_url(args.pg_url).update_query_dict({"options": f"-csearch_path={schema}"})
            try:
                results["postgresql"] = run_backend(
                    "pg", url.render_as_string(False), args.rows, args.single_rows, tmp
                )
            finally:
                dispose_engines()
                with psycopg.connect(admin, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA "{schema}" CASCADE')

    print(f"ingest: {args.rows} rows batched, {args.single_rows} rows one-commit-per-row")
    print(f"{'backend':<11}{'writer rows/s':>15}{'bulk rows/s':>14}{'single rows/s':>15}"
          f"{'writer/single':>15}{'bulk/single':>13}")  # fmt: skip
    for backend, r in results.items():
        print(f"{backend:<11}{r['writer']:>15,.0f}{r['bulk']:>14,.0f}{r['single']:>15,.0f}"
              f"{r['writer'] / r['single']:>14.1f}x{r['bulk'] / r['single']:>12.1f}x")  # fmt: skip
    ok = results["sqlite"]["writer"] >= SQLITE_TARGET
    verdict = "meets" if ok else "MISSES"
    print(
        f"SQLite batched writer {results['sqlite']['writer']:,.0f} rows/s {verdict} the "
        f"{SQLITE_TARGET:,.0f} rows/s target"
    )
    table = Table(
        f"{args.rows:,} rows batched, {args.single_rows:,} rows one commit per row",
        [
            "backend",
            "writer rows/s",
            "bulk rows/s",
            "single rows/s",
            "writer/single",
            "bulk/single",
        ],
    )
    for backend, r in results.items():
        table.add(
            backend,
            f"{r['writer']:,.0f}",
            f"{r['bulk']:,.0f}",
            f"{r['single']:,.0f}",
            f"{r['writer'] / r['single']:.1f}x",
            f"{r['bulk'] / r['single']:.1f}x",
        )
    write_results(
        "ingest",
        [table],
        [f"SQLite batched writer {verdict.lower()} the {SQLITE_TARGET:,.0f} rows/s target"],
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
