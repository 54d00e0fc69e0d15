"""Online serving on the GPU: N concurrent streaming clients against a real `vigil serve`.

Builds a random-weight SmolLM2-135M-shaped Hugging Face directory (config.json, safetensors, the
SmolLM2 tokenizer files from `--tokenizer-dir`), starts `vigil serve` on it as a subprocess on
127.0.0.1, and runs streaming /v1/completions clients (max_tokens tokens each, EOS ignored):
TTFT p50/p95, inter-token latency p50/p95 (gaps between streamed chunks), output tok/s. The peer
in the same run is a single client: the ratio shows what continuous batching buys.

    python -m bench.bench_serving --tokenizer-dir DIR [--clients 1,32] [--max-tokens 128]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import torch

from bench.results_table import Table, write_results

KEY = "vigil-dev-key"
PROMPTS = [
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Explain how a paged KV cache works in an inference engine.",
    "List ten uses for a paperclip, one per line.",
    "Describe the water cycle to a ten year old.",
]


def write_model_dir(out: Path, tokenizer_dir: Path) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM

    from bench.model_shapes import SMOLLM2_135M

    out.mkdir(parents=True, exist_ok=True)
    shape = dict(SMOLLM2_135M)
    cfg = AutoConfig.for_model(shape.pop("model_type"), **shape)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    model.save_pretrained(out)
    for src, dst in [("smollm2_tokenizer.json", "tokenizer.json"),
                     ("smollm2_tokenizer_config.json", "tokenizer_config.json"),
                     ("smollm2_chat_template.jinja", "chat_template.jinja")]:
        shutil.copy(tokenizer_dir / src, out / dst)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


MODEL = {"id": "vigil"}


async def one_client(client: httpx.AsyncClient, url: str, prompt: str, max_tokens: int) -> dict:
    body = {"model": MODEL["id"], "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
            "stream": True, "ignore_eos": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    stamps: list[float] = []
    tokens = 0
    async with client.stream("POST", url, json=body, headers={"Authorization": f"Bearer {KEY}"}) as r:
        if r.status_code != 200:
            raise RuntimeError(f"{r.status_code}: {(await r.aread()).decode()[:500]}")
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            if chunk.get("choices") and chunk["choices"][0].get("text"):
                stamps.append(time.perf_counter())
    ttft = stamps[0] - t0 if stamps else float("nan")
    itl = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    return {"ttft": ttft, "itl": itl, "tokens": tokens, "end": time.perf_counter()}


async def run_clients(base: str, n: int, max_tokens: int) -> dict:
    url = f"{base}/v1/completions"
    limits = httpx.Limits(max_connections=n + 4)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        await one_client(client, url, PROMPTS[0], 8)  # warm-up (graphs, compilation)
        t0 = time.perf_counter()
        res = await asyncio.gather(*[one_client(client, url, PROMPTS[i % len(PROMPTS)], max_tokens)
                                     for i in range(n)])
        wall = max(r["end"] for r in res) - t0
    itl = [x for r in res for x in r["itl"]]
    ttft = [r["ttft"] for r in res]
    tokens = sum(r["tokens"] for r in res)
    return {"clients": n, "ttft_p50_ms": 1e3 * pct(ttft, 0.5), "ttft_p95_ms": 1e3 * pct(ttft, 0.95),
            "itl_p50_ms": 1e3 * pct(itl, 0.5), "itl_p95_ms": 1e3 * pct(itl, 0.95),
            "output_tok_s": tokens / wall, "tokens": tokens, "wall_s": wall,
            "itl_mean_ms": 1e3 * statistics.fmean(itl) if itl else float("nan")}


def wait_healthy(base: str, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"vigil serve exited with {proc.returncode}")
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise RuntimeError("vigil serve did not become healthy in time")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer-dir", required=True)
    parser.add_argument("--model-dir", default="/tmp/vigil_smollm2_random")
    parser.add_argument("--clients", default="1,64")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--log", default="/tmp/vigil_serve.log")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    model_dir = Path(args.model_dir)
    write_model_dir(model_dir, Path(args.tokenizer_dir))
    env = dict(os.environ, VIGIL_DEVICE=args.device, VIGIL_MAX_NUM_SEQS="256", VIGIL_SAMPLE_RATE="0",
               VIGIL_SEGMENT_MIN_PER_HOUR="0", VIGIL_KV_CACHE_MEMORY_MB="8192",
               VIGIL_DATABASE_URL="sqlite:////tmp/vigil_bench.db", VIGIL_JOURNAL_DIR="/tmp/vigil_j",
               VIGIL_MAX_WAITING_REQUESTS="1024")
    cmd = [sys.executable, "-m", "vigil.cli", "serve", "--model", str(model_dir),
           "--port", str(args.port), "--host", "127.0.0.1"]
    base = f"http://127.0.0.1:{args.port}"
    with open(args.log, "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_healthy(base, proc)
        models = httpx.get(f"{base}/v1/models", headers={"Authorization": f"Bearer {KEY}"}).json()
        MODEL["id"] = models["data"][0]["id"]
        rows = [asyncio.run(run_clients(base, int(n), args.max_tokens))
                for n in args.clients.split(",")]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    table = Table(f"vigil serve on {args.device} (random SmolLM2-135M shape, SmolLM2 tokenizer), streaming "
                  f"/v1/completions, greedy, EOS ignored, {args.max_tokens} tokens per request",
                  ["clients", "TTFT p50 ms", "TTFT p95 ms", "ITL p50 ms", "ITL p95 ms", "output tok/s",
                   f"vs {rows[0]['clients']} client(s)"])
    print(f"## {table.title}\n{table.header()}")
    first = rows[0]["output_tok_s"]
    for r in rows:
        print(table.add(r["clients"], f"{r['ttft_p50_ms']:.1f}", f"{r['ttft_p95_ms']:.1f}",
                        f"{r['itl_p50_ms']:.2f}", f"{r['itl_p95_ms']:.2f}", f"{r['output_tok_s']:.0f}",
                        f"{r['output_tok_s'] / first:.1f}x"))
    print(json.dumps(rows))
    write_results("serving", [table])


if __name__ == "__main__":
    main()
