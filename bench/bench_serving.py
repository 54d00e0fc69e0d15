"""Online serving against the offline engine, like vLLM's benchmark_serving.

Starts `vigil serve` once per engine-process mode (`inprocess`, `separate`) and drives it with
streaming /v1/completions from several client processes: at a fixed concurrency (`--concurrency`)
and/or with Poisson arrivals at each of `--request-rates` (requests/s; `inf` sends all at once).
Input and output lengths come from a workload (`random` or the chat-like `chat` mix), prompts as
token ids, EOS ignored, greedy. Per run: request throughput, output tok/s, TTFT/TPOT/ITL
p50/p90/p99, goodput at TTFT <= 200 ms and TPOT <= 50 ms, client CPU seconds, and the machine's
load average (the machine may be shared). The same jobs then run through the offline engine
(LLMEngine, same settings, max_num_seqs = the concurrency) and served/offline output tok/s is
reported. One JSON file per run goes to --json-dir; the tables to bench/results/serving.md.

    python -m bench.bench_serving --device cpu --concurrency 8 --num-prompts 32 --output-len 32
    python -m bench.bench_serving --device cuda --tokenizer-dir DIR --concurrency 64,256 \
        --request-rates 16,64,inf --num-prompts 512 --input-len 128 --output-len 256
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bench.results_table import Table, write_results
from bench.serving_load import KEY, Job, poisson_schedule, run_load, workload

VOCAB = 49152  # SmolLM2's (the random GPU model has its shape): prompts draw ids past 100


def write_random_model(out: Path, tokenizer_dir: Path) -> None:
    """A random-weight SmolLM2-135M-shaped HF directory with SmolLM2's tokenizer (GPU runs)."""
    import shutil

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from bench.model_shapes import SMOLLM2_135M

    out.mkdir(parents=True, exist_ok=True)
    shape = dict(SMOLLM2_135M)
    cfg = AutoConfig.for_model(shape.pop("model_type"), **shape)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).save_pretrained(out)
    for src, dst in [("smollm2_tokenizer.json", "tokenizer.json"),
                     ("smollm2_tokenizer_config.json", "tokenizer_config.json"),
                     ("smollm2_chat_template.jinja", "chat_template.jinja")]:
        shutil.copy(tokenizer_dir / src, out / dst)


def server_env(args, mode: str, max_num_seqs: int) -> dict:
    env = dict(os.environ, VIGIL_ENGINE_PROCESS=mode, VIGIL_DEVICE=args.device,
               VIGIL_MAX_NUM_SEQS=str(max_num_seqs), VIGIL_SAMPLE_RATE="0", VIGIL_SEGMENT_MIN_PER_HOUR="0",
               VIGIL_KV_CACHE_MEMORY_MB=str(args.kv_cache_mb), VIGIL_MAX_WAITING_REQUESTS="4096",
               VIGIL_DATABASE_URL="sqlite:////tmp/vigil_bench.db", VIGIL_JOURNAL_DIR="/tmp/vigil_bench_journal",
               VIGIL_API_KEYS=json.dumps([KEY]), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if args.model:
        env["VIGIL_MODEL_PATH"] = args.model
    if args.torch_threads:
        env["VIGIL_TORCH_THREADS"] = str(args.torch_threads)
    return env


def start_server(args, mode: str, max_num_seqs: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "vigil.cli", "serve", "--port", str(args.port), "--host", "127.0.0.1"]
    with open(f"{args.log_prefix}-{mode}.log", "w") as log:
        proc = subprocess.Popen(cmd, env=server_env(args, mode, max_num_seqs), stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{args.port}"
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"vigil serve exited with {proc.returncode}; see {args.log_prefix}-{mode}.log")
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise RuntimeError("vigil serve did not become healthy in time")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def offline(args, jobs: list[Job], max_num_seqs: int) -> dict:
    """The same jobs through LLMEngine in this process, as fast as it steps."""
    from serving.engine import EngineConfig, LLMEngine
    from serving.sampling_params import SamplingParams
    from vigil.config import load_settings

    settings = load_settings(device=args.device, max_num_seqs=max_num_seqs, kv_cache_memory_mb=args.kv_cache_mb,
                             model_path=args.model, torch_threads=args.torch_threads)
    engine = LLMEngine(EngineConfig.from_settings(settings))
    warm = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True)
    engine.add_request("warm", jobs[0].prompt_ids, warm)
    while engine.has_unfinished_requests():
        engine.step()
    start, tokens = time.perf_counter(), 0
    for job in jobs:
        engine.add_request(f"j{job.index}", job.prompt_ids,
                           SamplingParams(max_tokens=job.max_tokens, temperature=0.0, ignore_eos=True))
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                tokens += len(out.outputs[0].token_ids)
    wall = time.perf_counter() - start
    return {"output_tok_s": tokens / wall, "wall_s": wall, "tokens": tokens}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    p.add_argument("--model", default=None, help="GGUF or HF dir (default: the SmolLM2 GGUF)")
    p.add_argument("--tokenizer-dir", default=None, help="GPU runs: random SmolLM2 shape with this tokenizer")
    p.add_argument("--modes", default="inprocess,separate")
    p.add_argument("--concurrency", default="8", help="fixed-concurrency runs, comma-separated ('' for none)")
    p.add_argument("--request-rates", default="", help="Poisson runs: requests/s, comma-separated, 'inf' allowed")
    p.add_argument("--num-prompts", type=int, default=32)
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
    if args.tokenizer_dir:
        args.model = args.model or "/tmp/vigil_smollm2_random"
        write_random_model(Path(args.model), Path(args.tokenizer_dir))
    concurrencies = [int(c) for c in args.concurrency.split(",") if c]
    rates = [float(r) for r in args.request_rates.split(",") if r]
    max_seqs = max(concurrencies + [64])
    jobs = workload(args.workload, args.num_prompts, VOCAB, args.input_len, args.output_len)
    Path(args.json_dir).mkdir(parents=True, exist_ok=True)
    runs: list[dict] = []
    for mode in args.modes.split(","):
        proc = start_server(args, mode, max_seqs)
        try:
            model = httpx.get(f"http://127.0.0.1:{args.port}/v1/models",
                              headers={"Authorization": f"Bearer {KEY}"}).json()["data"][0]["id"]
            base = f"http://127.0.0.1:{args.port}"
            run_load(base, model, jobs[:2], 1, 2)  # warm-up
            loads = [("concurrency", c) for c in concurrencies] + [("rate", r) for r in rates]
            for kind, value in loads:
                if kind == "rate":
                    poisson_schedule(jobs, value)
                load_before = os.getloadavg()[0]
                summary = run_load(base, model, jobs, args.client_procs, int(value) if kind == "concurrency" else None)
                run = {"mode": mode, "load": f"{kind} {value:g}", "workload": args.workload,
                       "machine_load_1m": round(max(load_before, os.getloadavg()[0]), 2), **summary}
                runs.append(run)
                print(json.dumps(run))
                (Path(args.json_dir) / f"{mode}-{kind}-{value:g}.json").write_text(json.dumps(run, indent=1))
        finally:
            stop_server(proc)
    offline_by_seqs = {}
    for run in runs:
        seqs = int(float(run["load"].split()[1])) if run["load"].startswith("concurrency") else max_seqs
        if seqs not in offline_by_seqs:
            offline_by_seqs[seqs] = offline(args, jobs, seqs)
            print(json.dumps({"offline_max_num_seqs": seqs, **offline_by_seqs[seqs]}))
        run["offline_output_tok_s"] = offline_by_seqs[seqs]["output_tok_s"]
        run["served_over_offline"] = run["output_tok_s"] / run["offline_output_tok_s"]
    report(args, runs)


def report(args, runs: list[dict]) -> None:
    title = (f"vigil serve on {args.device}, {args.workload} workload ({args.num_prompts} requests, input ~"
             f"{args.input_len}, output ~{args.output_len} tokens, greedy, EOS ignored), "
             f"{args.client_procs} client processes; SLO TTFT <= 200 ms, TPOT <= 50 ms")
    table = Table(title, ["engine process", "load", "req/s", "output tok/s", "offline tok/s", "served/offline",
                          "TTFT p50/p90/p99 ms", "TPOT p50/p90/p99 ms", "ITL p50/p90/p99 ms",
                          "goodput req/s", "client CPU s", "load avg 1m", "failed"])
    print(f"## {title}\n{table.header()}")

    def three(r: dict, name: str) -> str:
        return "/".join("-" if r[f"{name}_p{q}_ms"] is None else f"{r[f'{name}_p{q}_ms']:.0f}" for q in (50, 90, 99))

    for r in runs:
        print(table.add(r["mode"], r["load"], f"{r['request_throughput']:.2f}", f"{r['output_tok_s']:.1f}",
                        f"{r['offline_output_tok_s']:.1f}", f"{100 * r['served_over_offline']:.0f} %",
                        three(r, "ttft"), three(r, "tpot"), three(r, "itl"), f"{r['goodput_req_s']:.2f}",
                        r["client_cpu_s"], r["machine_load_1m"], r["failed"]))
    write_results("serving", [table])


if __name__ == "__main__":
    main()
