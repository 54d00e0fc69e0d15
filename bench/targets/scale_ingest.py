"""The ingest side of bench_scale: the sidecar app alone in its own process, the records of one
busy hour (six segments at unequal shares, made text of chat length) and the two-thread client
that POSTs them; and the database a run uses (a new PostgreSQL schema or a SQLite file)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import numpy as np
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

from bench.workloads.scale_texts import pairs
from storage.db import dispose_engines
from storage.migrate import upgrade
from vigil.config_tenancy import DEFAULT_DEV_OPERATOR_KEY

HOUR = timedelta(hours=1)
SEGMENTS = {"web": 0.45, "api": 0.25, "mobile": 0.15, "partner": 0.10, "batch": 0.04, "rare": 0.01}
BATCH = 1000
ANALYZE_EVERY = 100_000  # rows between ANALYZE runs where autovacuum is off


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


def ingest(
    base_url: str, tag: str, start: datetime, n: int, analyze: Callable[[], None] | None = None
) -> float:
    """Seconds to POST n records in batches from two threads; `analyze` (timed with the rest)
    after every ANALYZE_EVERY rows. A failed request or a dead thread fails the run."""
    chunks = [(lo, min(BATCH, n - lo)) for lo in range(0, n, BATCH)]
    errors: list[str] = []

    def worker(part: list[tuple[int, int]]) -> None:
        try:
            with httpx.Client(
                base_url=base_url,
                timeout=600,
                headers={"Authorization": f"Bearer {DEFAULT_DEV_OPERATOR_KEY}"},
            ) as client:
                for lo, count in part:
                    body = json.dumps({"samples": records(tag, start, lo, count, n, seed=lo)})
                    r = client.post(
                        "/v1/ingest", content=body, headers={"Content-Type": "application/json"}
                    )
                    if r.status_code != 200 or r.json().get("inserted") != count:
                        errors.append(f"{r.status_code} {r.text[:200]}")
                        return
        except Exception as exc:  # the thread's death must not pass for a short ingest
            errors.append(f"{exc.__class__.__name__}: {exc}")

    started = time.perf_counter()
    per_slice = ANALYZE_EVERY // BATCH
    for first in range(0, len(chunks), per_slice):
        part = chunks[first : first + per_slice]
        threads = [threading.Thread(target=worker, args=(part[i::2],)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise RuntimeError(f"ingest failed: {errors[0]}")
        if analyze is not None:
            analyze()
    return time.perf_counter() - started


def analyzer(url: str) -> Callable[[], None] | None:
    """ANALYZE samples, where the database's autovacuum is off (it would refresh the planner's
    statistics as the table grows by a tenth; without them the ingest's duplicate check, an
    IN list on the (record_id, tenant) index, turns into a sequential scan per request)."""
    if not url.startswith("postgresql"):
        return None
    engine = create_engine(url)
    with engine.connect() as conn:
        if conn.exec_driver_sql("SHOW autovacuum").scalar() == "on":
            return None

    def analyze() -> None:
        with engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE samples")
            conn.commit()

    return analyze


@contextmanager
def server(url: str, port: int):
    proc = subprocess.Popen([sys.executable, "-m", "bench.targets.scale_server", url, str(port)])
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


@contextmanager
def database(db_url: str):
    """A fresh database for the run: a new schema on PostgreSQL (dropped after), a temporary
    file for `sqlite`."""
    if db_url == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{Path(tmp) / 'scale.db'}"
            upgrade(url)
            try:
                yield url, "SQLite"
            finally:
                dispose_engines()
        return
    import psycopg  # PostgreSQL only: a SQLite run needs no driver

    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = make_url(db_url).set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = (
        make_url(db_url)
        .update_query_dict({"options": f"-csearch_path={schema}"})
        .render_as_string(False)
    )
    try:
        upgrade(url)
        yield url, "PostgreSQL"
    finally:
        dispose_engines()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
