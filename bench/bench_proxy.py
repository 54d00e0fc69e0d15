"""What `vigil proxy` adds in front of an engine: the same streaming jobs at a fixed concurrency
sent straight to `vigil serve` and through `vigil proxy` in front of it, alternating, in one
run (same server, same machine state). Figures: TTFT p50/p99, output tokens/s, the proxy's
added TTFT and its throughput ratio (median over rounds), and the proxy process's CPU per
streamed token. With `--spans`, a second engine with engine spans on (VIGIL_OTLP_TRACES_ENDPOINT
pointing at a null OTLP receiver in this process) runs the direct jobs too: spans on vs off.

    python -m bench.bench_proxy --device cuda --tokenizer-dir .gpuassets/tok --concurrency 64 \
        --num-prompts 768 --rounds 3 --spans
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from bench.process_cpu import cpu_seconds
from bench.results_table import Table, write_results
from bench.serving_load import KEY, run_load, workload
from bench.serving_server import (
    Storage,
    prompt_vocab,
    start_server,
    stop_server,
    write_random_model,
)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    p.add_argument("--model", default=None)
    p.add_argument("--tokenizer-dir", default=None)
    p.add_argument("--shape", default="smollm2-135m")
    p.add_argument(
        "--tiny-model", default=None, help="write a tiny random Llama here and serve it (CPU)"
    )
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--num-prompts", type=int, default=768)
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--client-procs", type=int, default=4)
    p.add_argument("--kv-cache-mb", type=int, default=24576)
    p.add_argument("--torch-threads", type=int, default=None)
    p.add_argument("--proxy-sample-rate", type=float, default=0.1)
    p.add_argument("--spans", action="store_true", help="also: engine spans on vs off")
    p.add_argument(
        "--fake-upstream",
        action="store_true",
        help="CPU: bench/fake_sse_upstream.py (one-token events every --itl-ms) instead of vigil "
        "serve",
    )
    p.add_argument("--itl-ms", type=float, default=5.0)
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--proxy-port", type=int, default=8766)
    p.add_argument("--log-prefix", default="/tmp/vigil_bench_proxy")
    return p.parse_args()


def start_proxy(args, upstream: str, storage: Storage) -> subprocess.Popen:
    env = dict(
        os.environ,
        VIGIL_API_KEYS=json.dumps([KEY]),
        VIGIL_PROXY_UPSTREAM_API_KEY=KEY,
        VIGIL_SAMPLE_RATE=f"{args.proxy_sample_rate:g}",
        VIGIL_SEGMENT_MIN_PER_HOUR="0",
        VIGIL_DATABASE_URL=f"sqlite:///{storage.db}",
        VIGIL_JOURNAL_DIR=str(storage.journal),
    )
    log = open(f"{args.log_prefix}-proxy.log", "w")  # noqa: SIM115 (the child keeps it)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vigil.cli",
            "proxy",
            "--upstream",
            upstream,
            "--host",
            "127.0.0.1",
            "--port",
            str(args.proxy_port),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{args.proxy_port}"
    for _ in range(600):
        if proc.poll() is not None:
            raise RuntimeError(Path(f"{args.log_prefix}-proxy.log").read_text()[-3000:])
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("vigil proxy did not start")


class NullOTLP:
    """Answers every OTLP/HTTP export with an empty success, counting the requests."""

    def __init__(self) -> None:
        self.requests = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                owner.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def main() -> None:
    args = parse_args()
    if args.tiny_model:
        from bench.tiny_model import write_tiny_model

        args.model = str(write_tiny_model(Path(args.tiny_model)))
    if args.tokenizer_dir:
        args.model = args.model or f"/tmp/vigil_{args.shape}_random"
        write_random_model(Path(args.model), Path(args.tokenizer_dir), args.shape, args.device)
    vocab = (
        1000
        if args.fake_upstream
        else prompt_vocab(args.model, args.shape if args.tokenizer_dir else None)
    )
    jobs = workload("random", args.num_prompts, vocab, args.input_len, args.output_len)
    model_name = Path(args.model).name if args.model else "SmolLM2-135M-Instruct"
    runs = Table(
        "direct vs through `vigil proxy`, one engine, alternating rounds",
        ["round", "path", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms", "output tok/s", "failed"],
    )
    summary = Table(
        "proxy vs direct (median over rounds)",
        [
            "concurrency",
            "TTFT p50 added ms",
            "TTFT p99 added ms",
            "throughput ratio",
            "proxy CPU us/token",
        ],
    )
    print(runs.header(), flush=True)
    root = Path(f"{args.log_prefix}-dirs")
    engine_store, proxy_store = Storage(root / "engine"), Storage(root / "proxy")
    for s in (engine_store, proxy_store):
        s.dir.mkdir(parents=True, exist_ok=True)
    if args.fake_upstream:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.fake_sse_upstream",
                "--port",
                str(args.port),
                "--itl-ms",
                str(args.itl_ms),
            ]
        )
        time.sleep(2.0)
    else:
        server = start_server(args, "separate", args.concurrency, 0.0, engine_store)
    direct_base = f"http://127.0.0.1:{args.port}"
    proxy = start_proxy(args, direct_base, proxy_store)
    proxy_base = f"http://127.0.0.1:{args.proxy_port}"
    name = _served_name(direct_base) or model_name
    results: dict[str, list[dict]] = {"direct": [], "proxy": []}
    proxy_cpu, proxy_tokens = 0.0, 0
    try:
        run_load(
            direct_base, name, jobs[: args.concurrency], args.client_procs, args.concurrency
        )  # warm-up
        run_load(proxy_base, name, jobs[: args.concurrency], args.client_procs, args.concurrency)
        for r in range(args.rounds):
            for path, base in (
                (("direct", direct_base), ("proxy", proxy_base))
                if r % 2 == 0
                else (("proxy", proxy_base), ("direct", direct_base))
            ):
                before = cpu_seconds(proxy.pid)
                out = run_load(base, name, jobs, args.client_procs, args.concurrency)
                if path == "proxy" and before is not None:
                    proxy_cpu += cpu_seconds(proxy.pid) - before
                    proxy_tokens += int(out["output_tok_s"] * out["wall_s"])
                results[path].append(out)
                print(
                    runs.add(
                        r + 1,
                        path,
                        _ms(out["ttft_p50_ms"]),
                        _ms(out["ttft_p99_ms"]),
                        _ms(out["itl_p50_ms"]),
                        f"{out['output_tok_s']:.0f}",
                        out["failed"],
                    ),
                    flush=True,
                )
    finally:
        stop_server(proxy)
        stop_server(server)
    med = {
        path: {
            k: statistics.median(o[k] for o in outs)
            for k in ("ttft_p50_ms", "ttft_p99_ms", "output_tok_s")
        }
        for path, outs in results.items()
    }
    ratio = med["proxy"]["output_tok_s"] / med["direct"]["output_tok_s"]
    added50 = med["proxy"]["ttft_p50_ms"] - med["direct"]["ttft_p50_ms"]
    added99 = med["proxy"]["ttft_p99_ms"] - med["direct"]["ttft_p99_ms"]
    per_token = 1e6 * proxy_cpu / proxy_tokens if proxy_tokens else None
    line = summary.add(
        args.concurrency,
        f"{added50:+.2f}",
        f"{added99:+.2f}",
        f"{ratio:.3f}",
        "-" if per_token is None else f"{per_token:.1f}",
    )
    print(summary.header() + "\n" + line, flush=True)
    tables = [runs, summary]
    notes = [
        f"targets: TTFT p50 added <= 2 ms ({'met' if added50 <= 2 else 'missed'}), "
        f"throughput >= 95 % ({'met' if ratio >= 0.95 else 'missed'})",
        f"proxy samples at {args.proxy_sample_rate:g} into SQLite; {proxy_store.rows()} rows "
        "stored",
    ]
    if args.fake_upstream:
        notes.append(
            f"upstream: bench/fake_sse_upstream.py, one-token events every {args.itl_ms:g} ms, no "
            "GPU"
        )
    if args.spans and not args.fake_upstream:
        tables.append(spans_on_off(args, jobs, name, engine_store, results["direct"], notes))
    write_results("proxy", tables, notes)


def spans_on_off(
    args, jobs, name: str, store: Storage, off_runs: list[dict], notes: list[str]
) -> Table:
    """The direct rounds again on an engine exporting a span per request to a null receiver."""
    table = Table(
        "engine spans on vs off (direct, medians)",
        ["spans", "TTFT p50 ms", "output tok/s", "ratio"],
    )
    sink = NullOTLP()
    os.environ["VIGIL_OTLP_TRACES_ENDPOINT"] = sink.url
    try:
        server = start_server(args, "separate", args.concurrency, 0.0, store)
    finally:
        del os.environ["VIGIL_OTLP_TRACES_ENDPOINT"]
    base = f"http://127.0.0.1:{args.port}"
    on_runs = []
    try:
        run_load(base, name, jobs[: args.concurrency], args.client_procs, args.concurrency)
        for _ in range(args.rounds):
            on_runs.append(run_load(base, name, jobs, args.client_procs, args.concurrency))
    finally:
        stop_server(server)
    off = statistics.median(o["output_tok_s"] for o in off_runs)
    on = statistics.median(o["output_tok_s"] for o in on_runs)
    table.add(
        "off", _ms(statistics.median(o["ttft_p50_ms"] for o in off_runs)), f"{off:.0f}", "1.000"
    )
    table.add(
        "on",
        _ms(statistics.median(o["ttft_p50_ms"] for o in on_runs)),
        f"{on:.0f}",
        f"{on / off:.3f}",
    )
    print(table.markdown(), flush=True)
    notes.append(
        f"spans on: {sink.requests} OTLP export requests received; target <= 2 % "
        f"({'met' if on / off >= 0.98 else 'missed'}); the spans-on engine is a second server "
        "start, so the ratio includes start-to-start variation"
    )
    return table


def _served_name(base: str) -> str | None:
    try:
        data = httpx.get(
            f"{base}/v1/models", headers={"Authorization": f"Bearer {KEY}"}, timeout=5
        ).json()
        return data["data"][0]["id"]
    except (httpx.HTTPError, KeyError, IndexError, ValueError):
        return None


if __name__ == "__main__":
    main()
