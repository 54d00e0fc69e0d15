"""Online serving against the offline engine, like vLLM's benchmark_serving.

Starts `vigil serve` once per engine-process mode (`inprocess`, `separate`) and traffic sample
rate (`--sample-rates`) and drives it with streaming /v1/completions from several client
processes: at a fixed concurrency (`--concurrency`; N with `--num-prompts N` is one burst of N,
every client process starting together) and/or with Poisson arrivals at each of
`--request-rates` (requests/s; `inf` sends all at once). Input and output lengths come from a
workload (`random` or the chat-like `chat` mix), prompts as token ids, EOS ignored, greedy. Per
run: request throughput, output tok/s, TTFT/TPOT/ITL p50/p90/p99, goodput at TTFT <= 200 ms and
TPOT <= 50 ms, the server's own mean TTFT and queue time (its vllm: histograms: the client's TTFT
minus these is spent on HTTP, parsing and streaming), the API processes' CPU seconds (in all and
per 1,000 streamed tokens: bench/common/process_cpu.py), client CPU seconds, and the machine's load
average (the machine may be shared).
The same jobs then run through the offline engine (LLMEngine, same model directory and
settings, max_num_seqs = the concurrency), `--offline-repeats` passes on one engine, and
served/offline output tok/s is reported against the fastest pass (the slowest is shown too: runs
of a few seconds vary by a fifth from pass to pass, so the suite's ratio runs use 1,536 jobs).

Model: the SmolLM2 GGUF by default; with `--tokenizer-dir` (GPU runs) random bf16 weights of
`--shape` (vigil/devtools/model_shapes.py, default smollm2-135m) written once to an HF directory
with that tokenizer, which both the server and the offline engine load.

Traffic logging: at sample rate 0 the server logs nothing; above 0 it runs its real sampler,
TrafficLogger and SampleWriter into a SQLite file of its own (VIGIL_SAMPLE_RATE,
VIGIL_DATABASE_URL, VIGIL_JOURNAL_DIR), and every sampled record is checked to be in the
database (at rate 1: one row per answered request). With rate 0 among the rates, served tok/s
with logging on over off is reported per mode and load. Exit status 1 if a check fails.

API server processes: `--api-server-count auto,1,4` starts one server per count (`vigil serve
--api-server-count N`: N API processes on one port feeding one engine core; above 1: `separate`
mode only). `auto`, the default as in `vigil serve`, is passed to the server as is and resolved
here by the server's own function (bench/targets/serving_api_count.py): the tables show `auto (N)`,
and the processes seen answering are checked against N.
`--tiny-model DIR` writes a tiny random Llama with a byte tokenizer there and serves it: the
model costs next to nothing, so the runs measure the API path (CPU comparison of 1 vs 2 below).

One JSON file per run goes to --json-dir; the tables to bench/results/serving.md.

    python -m bench.suites.bench_serving --device cpu --concurrency 4 --num-prompts 8 \
        --input-len 16 --output-len 8 --sample-rates 0,1
    python -m bench.suites.bench_serving --device cuda --tokenizer-dir DIR --shape qwen3-4b \
        --concurrency 64,256 --num-prompts 512 --input-len 128 --output-len 256 \
        --kv-cache-mb 16384 --client-procs 4 \
        --modes separate --sample-rates 0,1
    python -m bench.suites.bench_serving --device cpu --tiny-model /tmp/vigil_tiny \
        --modes separate --api-server-count 1,2 --concurrency 64 --num-prompts 64 \
        --input-len 16 --output-len 16 --torch-threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import httpx

from bench.common.process_cpu import api_pids, total_cpu_seconds
from bench.common.results_table import Table, write_results
from bench.targets.serving_api_count import AUTO, label, parse_counts, processes_answering, resolve
from bench.targets.serving_offline import offline
from bench.targets.serving_server import (
    Storage,
    kv_tokens,
    latency_means,
    latency_totals,
    prompt_vocab,
    sample_metrics,
    start_server,
    stop_server,
    write_random_model,
)
from bench.workloads.serving_load import KEY, Job, poisson_schedule, run_load, workload
from vigil.devtools.model_shapes import SHAPES


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    p.add_argument("--model", default=None, help="GGUF or HF dir (default: the SmolLM2 GGUF)")
    p.add_argument(
        "--tokenizer-dir",
        default=None,
        help="GPU runs: random weights of --shape with this tokenizer",
    )
    p.add_argument(
        "--shape",
        default=None,
        choices=sorted(SHAPES),
        help="with --tokenizer-dir (default smollm2-135m)",
    )
    p.add_argument("--modes", default="inprocess,separate")
    p.add_argument(
        "--api-server-count",
        default=[AUTO],
        type=parse_counts,
        help="API server processes, comma-separated numbers or auto (the default, as vigil "
        "serve): one server each (above 1: separate mode only)",
    )
    p.add_argument(
        "--tiny-model",
        default=None,
        help="write a tiny random Llama here and serve it (CPU API-path runs)",
    )
    p.add_argument(
        "--concurrency", default="8", help="fixed-concurrency runs, comma-separated ('' for none)"
    )
    p.add_argument(
        "--request-rates",
        default="",
        help="Poisson runs: requests/s, comma-separated, 'inf' allowed",
    )
    p.add_argument(
        "--sample-rates", default="0", help="traffic sample rates, one server each (e.g. 0,1)"
    )
    p.add_argument(
        "--server-per-concurrency",
        action="store_true",
        help="a server per concurrency, max_num_seqs = that concurrency, as the offline engine it "
        "is "
        "compared with (default: one server, max_num_seqs = the largest concurrency)",
    )
    p.add_argument("--num-prompts", type=int, default=32)
    p.add_argument(
        "--offline-repeats",
        type=int,
        default=2,
        help="passes of the jobs through the offline engine; the served run is compared with the "
        "best",
    )
    p.add_argument("--workload", default="random", choices=["random", "chat"])
    p.add_argument("--input-len", type=int, default=64)
    p.add_argument("--output-len", type=int, default=32)
    p.add_argument("--client-procs", type=int, default=2)
    p.add_argument("--kv-cache-mb", type=int, default=256)
    p.add_argument("--torch-threads", type=int, default=None)
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--log-prefix", default="/tmp/vigil_bench_serve")
    p.add_argument("--json-dir", default="/tmp/vigil_bench_serving")
    args = p.parse_args()
    if args.shape and not args.tokenizer_dir:
        p.error("--shape needs --tokenizer-dir (the random model gets that tokenizer)")
    return args


def main() -> None:
    args = parse_args()
    if args.tiny_model:
        from bench.common.tiny_model import write_tiny_model

        args.model = str(write_tiny_model(Path(args.tiny_model)))
    if args.tokenizer_dir:
        args.shape = args.shape or "smollm2-135m"
        args.model = args.model or f"/tmp/vigil_{args.shape}_random"
        write_random_model(Path(args.model), Path(args.tokenizer_dir), args.shape, args.device)
    concurrencies = [int(c) for c in args.concurrency.split(",") if c]
    rates = [float(r) for r in args.request_rates.split(",") if r]
    sample_rates = [float(r) for r in args.sample_rates.split(",") if r]
    max_seqs = max(concurrencies + [64])
    jobs = workload(
        args.workload,
        args.num_prompts,
        prompt_vocab(args.model, args.shape),
        args.input_len,
        args.output_len,
    )
    capacity = kv_tokens(args.shape, args.kv_cache_mb)
    if capacity is not None:
        worst = sorted((len(j.prompt_ids) + j.max_tokens for j in jobs), reverse=True)[:max_seqs]
        print(
            f"KV cache: {capacity} tokens (bf16); {len(worst)} longest jobs at once need "
            f"{sum(worst)}"
            + (" (preemption possible: raise --kv-cache-mb)" if sum(worst) > capacity else ""),
            flush=True,
        )
    Path(args.json_dir).mkdir(parents=True, exist_ok=True)
    loads = [("concurrency", c) for c in concurrencies] + [("rate", r) for r in rates]
    runs: list[dict] = []
    for mode in args.modes.split(","):
        for api_setting in args.api_server_count:
            if api_setting != AUTO and int(api_setting) > 1 and mode != "separate":
                print(
                    f"skipped: {api_setting} API servers need the separate engine process, not "
                    f"{mode}"
                )
                continue
            for sample_rate in sample_rates:
                if args.server_per_concurrency:
                    for load in loads:
                        seqs = int(load[1]) if load[0] == "concurrency" else max_seqs
                        runs += serve_runs(args, mode, sample_rate, jobs, [load], seqs, api_setting)
                else:
                    runs += serve_runs(args, mode, sample_rate, jobs, loads, max_seqs, api_setting)
    offline_by_seqs = {}
    for run in runs:
        seqs = (
            int(float(run["load"].split()[1]))
            if run["load"].startswith("concurrency")
            else max_seqs
        )
        if seqs not in offline_by_seqs:
            offline_by_seqs[seqs] = offline(args, jobs, seqs)
            print(json.dumps({"offline_max_num_seqs": seqs, **offline_by_seqs[seqs]}))
        run["offline_output_tok_s"] = offline_by_seqs[seqs]["output_tok_s"]
        run["offline_passes_tok_s"] = offline_by_seqs[seqs]["passes_tok_s"]
        run["offline_pass_spread"] = offline_by_seqs[seqs]["pass_spread"]
        run["served_over_offline"] = run["output_tok_s"] / run["offline_output_tok_s"]
    ok = report(args, runs)
    raise SystemExit(0 if ok else 1)


def serve_runs(
    args,
    mode: str,
    sample_rate: float,
    jobs: list[Job],
    loads: list,
    max_seqs: int,
    api_setting: str = "1",
) -> list[dict]:
    """One server (this mode, API process count setting and sample rate) through every load;
    with sampling on, each run carries the storage check: records sampled, rows in the database,
    nothing journaled/dropped."""
    api_servers = resolve(api_setting, mode, args.device, max_seqs)
    storage = Storage(Path(tempfile.mkdtemp(prefix="vigil-bench-storage-")))
    proc = start_server(args, mode, max_seqs, sample_rate, storage, api_setting)
    base = f"http://127.0.0.1:{args.port}"
    runs: list[dict] = []
    try:
        model = httpx.get(f"{base}/v1/models", headers={"Authorization": f"Bearer {KEY}"}).json()[
            "data"
        ][0]["id"]
        answered = run_load(base, model, jobs[:2], 1, 2)["completed"]  # warm-up (logged too)
        seen = processes_answering(base)
        if seen != api_servers:
            print(
                f"API server count {api_setting} resolved to {api_servers} here, but {seen} "
                "processes answered",
                flush=True,
            )
        pids = api_pids(proc.pid, api_servers, base)
        for kind, value in loads:
            if kind == "rate":
                poisson_schedule(jobs, value)
            load_before = os.getloadavg()[0]
            cpu_before, latency_before = total_cpu_seconds(pids), latency_totals(base)
            summary = run_load(
                base, model, jobs, args.client_procs, int(value) if kind == "concurrency" else None
            )
            summary.update(api_cpu(cpu_before, total_cpu_seconds(pids), summary))
            summary.update(latency_means(latency_before, latency_totals(base)))
            answered += summary["completed"]
            run = {
                "mode": mode,
                "api_servers": api_servers,
                "api_server_setting": api_setting,
                "api_processes_seen": seen,
                "load": f"{kind} {value:g}",
                "server_max_num_seqs": max_seqs,
                "sample_rate": sample_rate,
                "workload": args.workload,
                "machine_load_1m": round(max(load_before, os.getloadavg()[0]), 2),
                **summary,
            }
            if (
                sample_rate >= 1.0
            ):  # every answered request so far is a row (the writer lags a little)
                run["rows_expected"], run["rows_in_db"] = answered, storage.wait_rows(answered)
            runs.append(run)
            print(json.dumps(run), flush=True)
            name = f"{mode}-api{api_setting}-rate{sample_rate:g}-{kind}-{value:g}.json"
            (Path(args.json_dir) / name).write_text(json.dumps(run, indent=1))
        counters = _settled_counters(base) if sample_rate > 0 else {}
    finally:
        stop_server(proc)  # drains: the logger and writer flush before the process exits
    if sample_rate > 0:
        check = {
            "answered": answered,
            **counters,
            "rows": storage.rows(),
            "journal_files": len(storage.journal_files()),
        }
        check["all_in_db"] = (
            check["rows"] == check["sampled"]
            and not check["dropped"]
            and not check["journaled"]
            and (sample_rate < 1.0 or check["sampled"] == answered)
        )
        print(
            json.dumps(
                {
                    "mode": mode,
                    "api_servers": label(api_setting, api_servers),
                    "sample_rate": sample_rate,
                    "storage": str(storage.db),
                    **check,
                }
            ),
            flush=True,
        )
        for run in runs:
            run["logging"] = check
    return runs


def api_cpu(before: float | None, after: float | None, summary: dict) -> dict:
    """The API processes' CPU seconds over one load, in all and per 1,000 streamed tokens."""
    tokens = summary["output_tok_s"] * summary["wall_s"]
    if before is None or after is None or tokens <= 0:
        return {"api_cpu_s": None, "api_cpu_s_per_1k_tok": None}
    return {
        "api_cpu_s": round(after - before, 2),
        "api_cpu_s_per_1k_tok": round(1e3 * (after - before) / tokens, 4),
    }


def _settled_counters(base: str, timeout_s: float = 60.0) -> dict[str, float]:
    """The traffic counters once every sampled record is written, journaled or dropped."""
    deadline = time.monotonic() + timeout_s
    while True:
        c = sample_metrics(base)
        if (
            c["logged"] + c["journaled"] + c["dropped"] >= c["sampled"]
            or time.monotonic() > deadline
        ):
            return c
        time.sleep(0.2)


def _three(r: dict, name: str) -> str:
    return "/".join(
        "-" if r[f"{name}_p{q}_ms"] is None else f"{r[f'{name}_p{q}_ms']:.0f}" for q in (50, 90, 99)
    )


def _server_latency(r: dict) -> str:
    return "/".join(
        "-" if r.get(k) is None else f"{r[k]:.1f}"
        for k in ("server_ttft_mean_ms", "server_queue_mean_ms")
    )


def _api_servers(r: dict) -> str:
    """The setting and the count resolved; the processes seen when they differ."""
    cell = label(r.get("api_server_setting", str(r["api_servers"])), r["api_servers"])
    seen = r.get("api_processes_seen", r["api_servers"])
    return cell if seen == r["api_servers"] else f"{cell}, {seen} seen"


def report(args, runs: list[dict]) -> bool:
    """Print and keep the tables; False when a logging check failed."""
    shape = f"random {args.shape} weights, " if args.shape else ""
    title = (
        f"vigil serve on {args.device}, {shape}{args.workload} workload ({args.num_prompts} "
        "requests, input ~"
        f"{args.input_len}, output ~{args.output_len} tokens, greedy, EOS ignored), "
        f"{args.client_procs} client processes; SLO TTFT <= 200 ms, TPOT <= 50 ms"
    )
    table = Table(
        title,
        [
            "engine process",
            "API servers",
            "load",
            "server max seqs",
            "sample rate",
            "req/s",
            "output tok/s",
            "offline tok/s",
            "offline slowest pass",
            "served/offline",
            "TTFT p50/p90/p99 ms",
            "server TTFT / queue mean ms",
            "TPOT p50/p90/p99 ms",
            "ITL p50/p90/p99 ms",
            "goodput req/s",
            "API CPU s",
            "API CPU s / 1k tok",
            "tok / event",
            "client CPU s",
            "load avg 1m",
            "failed",
        ],
    )
    print(f"## {title}\n{table.header()}")
    for r in runs:
        print(
            table.add(
                r["mode"],
                _api_servers(r),
                r["load"],
                r["server_max_num_seqs"],
                f"{r['sample_rate']:g}",
                f"{r['request_throughput']:.2f}",
                f"{r['output_tok_s']:.1f}",
                f"{r['offline_output_tok_s']:.1f}",
                f"{min(r['offline_passes_tok_s']):.1f}",
                f"{100 * r['served_over_offline']:.0f} % "
                f"(passes ±{50 * r.get('offline_pass_spread', 0.0):.0f} %)",
                _three(r, "ttft"),
                _server_latency(r),
                _three(r, "tpot"),
                _three(r, "itl"),
                f"{r['goodput_req_s']:.2f}",
                r["api_cpu_s"],
                r["api_cpu_s_per_1k_tok"],
                r["tokens_per_event"],
                r["client_cpu_s"],
                r["machine_load_1m"],
                r["failed"],
            )
        )
    tables, ok = [table], True
    logged = [r for r in runs if r["sample_rate"] > 0]
    if logged:
        on_off = Table(
            "traffic logging to SQLite on (sample rate > 0) vs off (0): served output tok/s, "
            "and every sampled record in the database",
            [
                "engine process",
                "API servers",
                "load",
                "sample rate",
                "off tok/s",
                "on tok/s",
                "on/off",
                "answered",
                "sampled",
                "rows in DB",
                "journaled",
                "dropped",
                "all in DB",
            ],
        )
        print(f"## {on_off.title}\n{on_off.header()}")
        off = {(r["mode"], _api_servers(r), r["load"]): r for r in runs if r["sample_rate"] == 0}
        for r in logged:
            base, check = off.get((r["mode"], _api_servers(r), r["load"])), r["logging"]
            ok &= check["all_in_db"]
            print(
                on_off.add(
                    r["mode"],
                    _api_servers(r),
                    r["load"],
                    f"{r['sample_rate']:g}",
                    f"{base['output_tok_s']:.1f}" if base else "-",
                    f"{r['output_tok_s']:.1f}",
                    f"{100 * r['output_tok_s'] / base['output_tok_s']:.1f} %" if base else "-",
                    check["answered"],
                    int(check["sampled"]),
                    check["rows"],
                    int(check["journaled"]),
                    int(check["dropped"]),
                    "yes" if check["all_in_db"] else "NO",
                )
            )
        tables.append(on_off)
    write_results("serving", tables)
    if not ok:
        print(
            "traffic logging check FAILED: a sampled record did not reach the database", flush=True
        )
    return ok


if __name__ == "__main__":
    main()
