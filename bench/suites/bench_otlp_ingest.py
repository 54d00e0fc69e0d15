"""The sidecar's OTLP receiver vs its own ingest API on the same records: rows stored per second
through `POST /v1/ingest` (JSON sample records), `POST /v1/traces` (the same records as
GenAI spans with semconv 1.37 content attributes, OTLP protobuf and OTLP/JSON), and
`POST /v1/traces` plus `POST /v1/logs` (spans without text and their content log records, joined
in the database: bench.workloads.otlp_bodies), in batches,
against the sidecar app under uvicorn on loopback, SQLite and (when reachable) PostgreSQL.

    .venv/bin/python -m bench.suites.bench_otlp_ingest [--rows 3000] [--batch 500] [--rounds 3] \
        [--pg-url URL] [--no-pg]

The client runs in this process beside the server (one interpreter), so the figures compare
the paths with each other rather than bound the sidecar; each path's rows get fresh ids.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
import psycopg
import uvicorn
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from sqlalchemy.engine import make_url

from bench.common.results_table import Table, write_results
from bench.workloads.otlp_bodies import otlp_json, span_and_log_bodies, spans_of
from storage.db import dispose_engines

KEY = "bench-operator-key-0123456789"
WARM_S = 3.0


def records(n: int, tag: str) -> list[dict]:
    now = time.time()
    return [
        {
            "id": f"{tag}-{uuid.uuid4().hex[:20]}",
            "timestamp": now - 60 + i * 1e-3,
            "segment": f"s{i % 5}",
            "model_version": "smollm2",
            "prompt": f"Question {i}: " + "explain the paged KV cache " * 10,
            "response": f"Answer {i}: " + "blocks are allocated on demand " * 6,
            "prompt_tokens": 80 + i % 50,
            "completion_tokens": 40 + i % 30,
            "finish_reason": "stop",
            "latency_ms": 300.0 + i % 100,
        }
        for i in range(n)
    ]


def bodies(kind: str, rows: list[dict], batch: int) -> list[tuple[bytes, str]]:
    out = []
    for i in range(0, len(rows), batch):
        part = rows[i : i + batch]
        if kind == "ingest":
            out.append((json.dumps({"samples": part}).encode(), "application/json"))
        elif kind == "traces+logs":
            traces, logs = span_and_log_bodies(part)
            out += [(traces, "/v1/traces"), (logs, "/v1/logs")]
        elif kind == "otlp-protobuf":
            out.append((encode_spans(spans_of(part)).SerializeToString(), "application/x-protobuf"))
        else:
            out.append((otlp_json(spans_of(part)), "application/json"))
    return out


def serve(url: str, tmp: Path):
    from sidecar.app import create_app
    from storage.db import session_factory
    from storage.migrate import upgrade
    from vigil.config import load_settings

    upgrade(url)
    settings = load_settings(
        database_url=url,
        operator_keys=[KEY],
        report_dir=tmp / "r",
        ingest_max_bytes=64 * 1024 * 1024,
        ingest_max_samples=5000,
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings, session_factory(url)),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="off",
        )
    )
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.02)
    return server, f"http://127.0.0.1:{port}"


def run(
    url: str, kinds: list[str], rows: int, batch: int, tmp: Path, rounds: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Rows/s and process CPU microseconds per row, per path: medians of `rounds` rounds, the
    paths taking turns within each."""
    server, base = serve(url, tmp)
    time.sleep(WARM_S)  # the app's start-up threads (chart warm-up) done before any clock
    seen: dict[str, list[float]] = {kind: [] for kind in kinds}
    cpu: dict[str, list[float]] = {kind: [] for kind in kinds}
    try:
        with httpx.Client(
            base_url=base, timeout=300, headers={"Authorization": f"Bearer {KEY}"}
        ) as client:
            for round_ in range(rounds):
                for kind in kinds if round_ % 2 == 0 else kinds[::-1]:
                    payloads = bodies(
                        kind, records(rows, f"{kind}{round_}"), batch
                    )  # built off the clock
                    path = "/v1/ingest" if kind == "ingest" else "/v1/traces"
                    start, cpu_start = time.perf_counter(), time.process_time()
                    for body, content_type in payloads:
                        if content_type.startswith("/v1/"):  # traces+logs: the path in its place
                            path, content_type = content_type, "application/x-protobuf"
                        r = client.post(path, content=body, headers={"Content-Type": content_type})
                        assert r.status_code == 200, r.text[:300]
                        if kind == "ingest":
                            assert r.json()["inserted"] == min(batch, rows), r.text
                        elif kind == "otlp-json":
                            assert (
                                "partialSuccess" not in r.json() or not r.json()["partialSuccess"]
                            ), r.text
                    seen[kind].append(rows / (time.perf_counter() - start))
                    cpu[kind].append(1e6 * (time.process_time() - cpu_start) / rows)
    finally:
        server.should_exit = True
    return (
        {kind: statistics.median(values) for kind, values in seen.items()},
        {kind: statistics.median(values) for kind, values in cpu.items()},
    )


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=3000, help="rows per path and round")
    p.add_argument("--batch", type=int, default=500)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--pg-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    p.add_argument("--no-pg", action="store_true")
    args = p.parse_args()
    kinds = ["ingest", "otlp-protobuf", "otlp-json", "traces+logs"]
    table = Table(
        f"rows stored per second, batches of {args.batch}",
        [
            "backend",
            "/v1/ingest rows/s",
            "OTLP protobuf rows/s",
            "OTLP/JSON rows/s",
            "traces+logs rows/s",
            "protobuf / ingest",
            "JSON / ingest",
            "traces+logs / ingest",
        ],
    )
    cpu_table = Table(
        "process CPU per stored row (client and server together), microseconds",
        [
            "backend",
            "/v1/ingest",
            "OTLP protobuf",
            "OTLP/JSON",
            "traces+logs",
            "ingest / protobuf",
            "ingest / JSON",
            "ingest / traces+logs",
        ],
    )
    print(table.header(), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        backends = ["sqlite"] + ([] if args.no_pg else ["postgresql"])
        for name in backends:
            if name == "sqlite":
                r, c = run(
                    f"sqlite:///{tmp}/bench.db",
                    kinds,
                    args.rows,
                    args.batch,
                    Path(tmp),
                    args.rounds,
                )
            else:  # a scratch schema, dropped afterwards
                schema = f"bench_{uuid.uuid4().hex[:10]}"
                admin = make_url(args.pg_url).set(drivername="postgresql").render_as_string(False)
                with psycopg.connect(admin, autocommit=True) as conn:
                    conn.execute(f'CREATE SCHEMA "{schema}"')
                url = make_url(args.pg_url).update_query_dict(
                    {"options": f"-csearch_path={schema}"}
                )
                try:
                    r, c = run(
                        url.render_as_string(False),
                        kinds,
                        args.rows,
                        args.batch,
                        Path(tmp),
                        args.rounds,
                    )
                finally:
                    dispose_engines()
                    with psycopg.connect(admin, autocommit=True) as conn:
                        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
            print(
                table.add(
                    name,
                    f"{r['ingest']:,.0f}",
                    f"{r['otlp-protobuf']:,.0f}",
                    f"{r['otlp-json']:,.0f}",
                    f"{r['traces+logs']:,.0f}",
                    f"{r['otlp-protobuf'] / r['ingest']:.2f}",
                    f"{r['otlp-json'] / r['ingest']:.2f}",
                    f"{r['traces+logs'] / r['ingest']:.2f}",
                ),
                flush=True,
            )
            cpu_table.add(
                name,
                f"{c['ingest']:,.0f}",
                f"{c['otlp-protobuf']:,.0f}",
                f"{c['otlp-json']:,.0f}",
                f"{c['traces+logs']:,.0f}",
                f"{c['ingest'] / c['otlp-protobuf']:.2f}",
                f"{c['ingest'] / c['otlp-json']:.2f}",
                f"{c['ingest'] / c['traces+logs']:.2f}",
            )
    print(cpu_table.markdown(), flush=True)
    write_results(
        "otlp_ingest",
        [table, cpu_table],
        [
            "client and server share one interpreter on a shared 2-core machine: compare the "
            "paths, not the totals;"
            f" medians of {args.rounds} rounds of {args.rows} rows per path, the paths taking "
            "turns",
            "the CPU table counts the one process's CPU time, which other work on a shared machine "
            "does not inflate the way it stretches wall time",
            "OTLP rows carry the same text, token counts, finish reason, segment, model and "
            "latency as the ingest rows; traces+logs rows are complete when stored (the span "
            "and its content log record joined through the otlp_pending table)",
        ],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
