"""The embed job's work queues at 100k samples on SQLite and PostgreSQL, before and after the
queue index (migration 0012: `embeddings (sample_id, model)`, and SQLite statistics).

    .venv/bin/python -m bench.suites.bench_embed_queue [--samples 100000] [--build-samples 1000]
        [--cap-s 120] [--pg-url URL] [--no-pg]

Per backend, one database seeded with `--samples` samples one hour per `--build-samples`
(the newest 30 % without vectors, the rest with prompt and response vectors of MiniLM's width):
  unread queue   `samples_missing_embeddings`, one batch of 256 (median of 3)
  window queue   `queued_samples` of the newest hour's window queue, one batch of 256
  baseline build `build_baseline_from_window` on the newest hour (`--build-samples` samples):
                 embeds its rows through the real job and queues, freezes the baseline. The
                 embedder is a stand-in (seeded random vectors), so the figure is the storage
                 side; MiniLM on CPU adds about the same time before and after.
"after" is the schema at head as `vigil db upgrade` leaves it; "before" the same database with
the index dropped and, on SQLite, no statistics (what migrations up to 0011 left). A step
stopped at `--cap-s` is reported as "> cap". The ratio is before / after, same run.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import psycopg
from sqlalchemy import event, insert, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import sessionmaker

from bench.common.results_table import Table, write_results
from sidecar.embedder import embedder_name
from sidecar.jobs.baselines import build_baseline_from_window
from storage.db import dispose_engines, make_engine
from storage.migrate import upgrade
from storage.models import Embedding, Sample
from storage.repositories.embed_queue import queued_samples, window_queue
from storage.repositories.embeddings import samples_missing_embeddings
from vigil.config import load_settings

END = datetime(2026, 11, 30, tzinfo=UTC)
DIM = 384


class Capped(Exception):
    pass


class StandInEmbedder:
    """Seeded random unit vectors per text: the job's storage work without the model's CPU."""

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(t.encode(), digest_size=4).digest(), "big")
            v = np.random.default_rng(seed).standard_normal(DIM)
            out[i] = v / np.linalg.norm(v)
        return out


def seed(url: str, n: int, per_hour: int, model: str) -> None:
    step = 3600.0 / per_hour
    engine = make_engine(url)
    vec = np.zeros(DIM, dtype="<f4").tobytes()
    with engine.begin() as conn:
        for lo in range(0, n, 5000):
            rows, embs = [], []
            for i in range(lo, min(n, lo + 5000)):
                sid = f"s{i:07d}"
                ts = END - timedelta(seconds=(n - i) * step)
                rows.append(
                    {
                        "id": sid,
                        "record_id": sid,
                        "timestamp": ts,
                        "ingested_at": ts,
                        "segment": f"seg{i % 4}",
                        "tenant": f"t{i % 3}",
                        "sample_weight": 1.0,
                        "source": "ingest",
                        "prompt": f"question {i} about topic {i % 50}",
                        "response": f"answer {i}",
                        "latency_ms": 100.0 + i % 300,
                    }
                )
                if i < 0.7 * n:
                    embs += [
                        {"sample_id": sid, "field": f, "model": model, "dim": DIM, "vector": vec}
                        for f in ("prompt", "response")
                    ]
            conn.execute(insert(Sample), rows)
            if embs:
                conn.execute(insert(Embedding), embs)
        if conn.dialect.name == "postgresql":
            conn.execute(text("ANALYZE"))
    engine.dispose()


def capped_factory(url: str, cap_s: float):
    """A session factory whose statements stop after `cap_s` (SQLite: progress handler on a
    deadline; PostgreSQL: statement_timeout), and a function that restarts the deadline."""
    deadline = [0.0]
    engine = make_engine(url)
    postgres = engine.dialect.name == "postgresql"

    @event.listens_for(engine, "connect")
    def _limit(dbapi_conn, _record):
        if postgres:
            with dbapi_conn.cursor() as cur:
                cur.execute(f"SET statement_timeout = {int(cap_s * 1000)}")
            dbapi_conn.commit()
        else:
            dbapi_conn.set_progress_handler(lambda: time.monotonic() > deadline[0], 100_000)

    def restart() -> None:
        deadline[0] = time.monotonic() + cap_s

    return engine, sessionmaker(bind=engine), restart


def timed(fn, restart, cap_s: float, repeat: int) -> float | None:
    """Median seconds of `repeat` calls, or None when one ran past the cap."""
    times = []
    for _ in range(repeat):
        restart()
        start = time.perf_counter()
        try:
            fn()
        except DBAPIError:
            return None
        elapsed = time.perf_counter() - start
        if elapsed > cap_s:
            return None
        times.append(elapsed)
    return statistics.median(times)


def measure(url: str, settings, model: str, per_hour: int, cap_s: float) -> dict[str, float | None]:
    engine, factory, restart = capped_factory(url, cap_s)
    start = END - timedelta(hours=1)
    out: dict[str, float | None] = {}
    with factory() as s:
        out["unread"] = timed(lambda: samples_missing_embeddings(s, model, 256), restart, cap_s, 3)
        s.rollback()
        out["window"] = timed(
            lambda: queued_samples(s, window_queue(s, start, END, max_rows=50_000), model, 256),
            restart,
            cap_s,
            3,
        )
        s.rollback()
    import sidecar.jobs.embed as embed_job

    real = embed_job.get_embedder
    embed_job.get_embedder = lambda _config: StandInEmbedder()
    restart()
    try:
        began = time.perf_counter()
        build_baseline_from_window(
            settings, factory, start, END, now=END, name=f"bench-{uuid.uuid4().hex[:6]}"
        )
        out["build"] = time.perf_counter() - began
        out["build"] = None if out["build"] > cap_s else out["build"]
    except DBAPIError:
        out["build"] = None
    finally:
        embed_job.get_embedder = real
    with engine.begin() as conn:  # the window unembedded again, for the next measurement
        conn.execute(
            text(
                "DELETE FROM embeddings WHERE sample_id IN "
                "(SELECT id FROM samples WHERE timestamp >= :t)"
            ),
            {"t": start},
        )
    engine.dispose()
    return out


def to_before(url: str) -> None:
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DROP INDEX ix_embeddings_sample_model"))
        if conn.dialect.name == "sqlite":
            conn.execute(text("DELETE FROM sqlite_stat1"))
        else:
            conn.execute(text("ANALYZE"))
    engine.dispose()
    dispose_engines()


def run_backend(
    url: str, n: int, per_hour: int, cap_s: float
) -> dict[str, dict[str, float | None]]:
    upgrade(url)
    settings = load_settings(database_url=url)
    model = embedder_name(settings.embedding_model_path)
    t = time.perf_counter()
    seed(url, n, per_hour, model)
    print(f"  seeded {n:,} samples in {time.perf_counter() - t:.0f}s", flush=True)
    after = measure(url, settings, model, per_hour, cap_s)
    print(f"  after:  {after}", flush=True)
    to_before(url)
    before = measure(url, settings, model, per_hour, cap_s)
    print(f"  before: {before}", flush=True)
    return {"before": before, "after": after}


def fmt(x: float | None, cap_s: float) -> str:
    return f"> {cap_s:.0f} s" if x is None else f"{x:.3f} s"


def ratio(before: float | None, after: float | None, cap_s: float) -> str:
    if after is None:
        return "-"
    return f"> {cap_s / after:,.0f}x" if before is None else f"{before / after:,.1f}x"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument(
        "--build-samples", type=int, default=1000, help="samples per hour (the built window)"
    )
    parser.add_argument("--cap-s", type=float, default=120.0)
    parser.add_argument("--pg-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--no-pg", action="store_true")
    args = parser.parse_args()

    results = {}
    with tempfile.TemporaryDirectory() as tmpdir:
        print("sqlite", flush=True)
        results["sqlite"] = run_backend(
            f"sqlite:///{Path(tmpdir) / 'bench.db'}", args.samples, args.build_samples, args.cap_s
        )
    if not args.no_pg:
        schema = f"bench_{uuid.uuid4().hex[:10]}"
        admin = make_url(args.pg_url).set(drivername="postgresql").render_as_string(False)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        url = make_url(args.pg_url).update_query_dict({"options": f"-csearch_path={schema}"})
        try:
            print("postgresql", flush=True)
            results["postgresql"] = run_backend(
                url.render_as_string(False), args.samples, args.build_samples, args.cap_s
            )
        finally:
            dispose_engines()
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')

    table = Table(
        f"{args.samples:,} samples (30 % without vectors), queue batch of 256; baseline build "
        f"of one hour ({args.build_samples:,} samples, stand-in embedder)",
        ["backend", "step", "before", "after", "before/after"],
    )
    names = {
        "unread": "unread queue batch",
        "window": "window queue batch",
        "build": "baseline build",
    }
    print(table.header())
    for backend, r in results.items():
        for key, label in names.items():
            b, a = r["before"][key], r["after"][key]
            print(
                table.add(
                    backend, label, fmt(b, args.cap_s), fmt(a, args.cap_s), ratio(b, a, args.cap_s)
                )
            )
    write_results(
        "embed_queue",
        [table],
        [
            "before: the same database without `ix_embeddings_sample_model` and, on SQLite, "
            "without "
            "statistics (the schema up to migration 0011); after: at head, as `vigil db upgrade` "
            "leaves it"
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
