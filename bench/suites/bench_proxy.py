"""What `vigil proxy` adds in front of an engine: the same streaming jobs at a fixed concurrency
sent straight to `vigil serve` and through `vigil proxy` in front of it, alternating, in one
run (same server, same machine state). Figures: TTFT p50/p99, output tokens/s, the proxy's
added TTFT and its throughput ratio (median over rounds), and the proxy process's CPU per
streamed token (all its worker processes together). `--fake-upstream` puts
bench/targets/fake_sse_upstream.py in place of the engine, for CPU runs of the proxy's own cost.

    python -m bench.suites.bench_proxy --device cuda --tokenizer-dir .gpuassets/tok \
        --concurrency 64 --num-prompts 768 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bench.common.process_cpu import api_pids, total_cpu_seconds
from bench.common.results_table import Table, write_results
from bench.targets.serving_server import (
    Storage,
    prompt_vocab,
    start_server,
    stop_server,
    write_random_model,
)
from bench.workloads.serving_load import KEY, run_load, workload


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
    p.add_argument(
        "--proxy-workers", type=int, default=0, help="vigil proxy --workers (0: its default)"
    )
    p.add_argument(
        "--fake-upstream",
        action="store_true",
        help="CPU: bench/targets/fake_sse_upstream.py (one-token events every --itl-ms) "
        "instead of vigil serve",
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
            "--workers",
            str(args.proxy_workers),
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


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def main() -> None:
    args = parse_args()
    if args.tiny_model:
        from bench.common.tiny_model import write_tiny_model

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
                "bench.targets.fake_sse_upstream",
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
    workers = _proxy_workers(proxy.pid)
    pids = api_pids(proxy.pid, workers, proxy_base) if workers > 1 else [proxy.pid]
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
                before = total_cpu_seconds(pids)
                out = run_load(base, name, jobs, args.client_procs, args.concurrency)
                if path == "proxy" and before is not None:
                    proxy_cpu += total_cpu_seconds(pids) - before
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
    notes.append(f"vigil proxy --workers {args.proxy_workers}: {workers} process(es)")
    if args.fake_upstream:
        notes.append(
            "upstream: bench/targets/fake_sse_upstream.py, "
            f"one-token events every {args.itl_ms:g} ms, no GPU"
        )
    write_results("proxy", tables, notes)


def _proxy_workers(pid: int) -> int:
    """How many worker processes `vigil proxy` runs (its spawned children other than
    multiprocessing's resource tracker), 1 when it serves itself."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        lines = [Path(f"/proc/{c}/cmdline").read_bytes() for c in children]
    except OSError:
        return 1
    return max(1, sum(1 for line in lines if b"resource_tracker" not in line))


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
