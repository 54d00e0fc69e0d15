"""Prefill on the engine: how fast long prompts reach their first token, and what a long prompt
chunked in does to the decodes already running.

(a) Long prompts: `--batches` (1, 16) prompts of `--prompt-len` (4,096) random tokens queued at
once, one output token each. Per batch: each prompt's time to first token (add_request until the
step that emits it returns; p50 and max over the prompts, median over `--reps` rounds after one
of warm-up), the prefill time (the last prompt's TTFT), prefill tok/s (prompt tokens over the
prefill time) and MFU against the H200's dense bf16 tensor-core peak (`--peak-tflops`, 989).

FLOPs of one prompt of L tokens (multiply-adds count 2):

    2 x P x L  +  4 x layers x heads x head_dim x L(L+1)/2  +  2 x vocab x hidden

P: the non-embedding parameters (the layers' projections and norms, the final norm; the tied or
separate output embedding is not in P). Attention: Q.K and P.V, 2 x head_dim FLOPs per query head
and key each, causal (query i sees i keys: L(L+1)/2 pairs; chunked prefill computes the same
pairs). The last term: the lm_head on the one sampled row.

(b) Interference (bench/suites/prefill_interference.py): `--streams` (32) decode streams running;
their TPOT (the gaps between a stream's successive tokens, p50/p99/max) alone, then while a prompt
of `--prompt-len` tokens is chunked in (the gaps that end between its add_request and its first
token; `--reps` prompts one after another, each followed by decode-only steps).

Both parts run once per `--max-num-batched-tokens` value: the scheduler's token budget per step
(VIGIL_MAX_NUM_BATCHED_TOKENS; chunked prefill on, the engine's default), which sets the chunk
a long prompt is cut into beside the running decodes (a chunk is the budget less their tokens).
The default is the engine's own; the offline benchmarks run at 8,192.

Random weights of `--shape` (vigil/devtools/model_shapes.py) on `--device cuda`; `--device cpu
--shape tiny` (bench/common/tiny_model.py's two-layer model) runs the same code in seconds on a CPU.
Results to bench/results/prefill.md.

    python -m bench.suites.bench_prefill --shape qwen3-4b --max-num-batched-tokens 2048,8192
    python -m bench.suites.bench_prefill --device cpu --shape tiny --prompt-len 256 --batches 1,4 \\
        --streams 4 --decode-steps 16 --max-num-batched-tokens 64,512
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from bench.common.results_table import Table, write_results
from bench.common.roofline import weight_bytes
from bench.common.tiny_model import TINY
from serving.sampling_params import SamplingParams
from vigil.config import Settings
from vigil.devtools.model_shapes import SHAPES

H200_BF16_DENSE_TFLOPS = 989.0
# the tiny CPU model, with the fields the FLOP count and the engine's loader read
TINY_SHAPE = {
    **TINY,
    "head_dim": TINY["hidden_size"] // TINY["num_attention_heads"],
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "attention_bias": False,
}
ALL_SHAPES = {**SHAPES, "tiny": TINY_SHAPE}


def non_embedding_params(cfg: dict) -> int:
    """The layers' parameters and the final norm (weight_bytes at one byte per element, less the
    embedding and output matrices it counts)."""
    embeddings = cfg["vocab_size"] * cfg["hidden_size"] * (1 if cfg["tie_word_embeddings"] else 2)
    return weight_bytes(cfg, elem=1) - embeddings


def prefill_flops(cfg: dict, prompt_len: int) -> float:
    """FLOPs of prefilling one prompt of `prompt_len` tokens (the module docstring's formula)."""
    attention = (
        4
        * cfg["num_hidden_layers"]
        * cfg["num_attention_heads"]
        * cfg["head_dim"]
        * prompt_len
        * (prompt_len + 1)
        / 2
    )
    lm_head = 2 * cfg["vocab_size"] * cfg["hidden_size"]
    return 2 * non_embedding_params(cfg) * prompt_len + attention + lm_head


def figure(x: float) -> str:
    """One decimal, or three significant digits below 10 (a CPU run's TFLOPS and MFU)."""
    return f"{x:.1f}" if abs(x) >= 10 else f"{x:.3g}"


def sync(engine) -> None:
    if engine.device.type == "cuda":
        torch.cuda.synchronize()


def set_budget(engine, tokens: int) -> None:
    """The scheduler's token budget per step from now on (engine.reset keeps it)."""
    engine.config.max_num_batched_tokens = tokens
    engine.scheduler.config.max_num_batched_tokens = tokens


def prompts(vocab: int, count: int, length: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (count, length), generator=g).tolist()


def ttft_round(engine, batch: list[list[int]], tag: str) -> tuple[list[float], int]:
    """Queue `batch` at once; each prompt's seconds to its first token, and the engine steps."""
    params = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True)
    sync(engine)
    t0 = time.perf_counter()
    for i, p in enumerate(batch):
        engine.add_request(f"{tag}-{i}", p, params)
    first: dict[str, float] = {}
    steps = 0
    while engine.has_unfinished_requests():
        outs = engine.step()
        steps += 1
        now = time.perf_counter()
        for o in outs:
            if o.outputs[0].token_ids and o.request_id not in first:
                first[o.request_id] = now - t0
    if len(first) != len(batch):
        raise RuntimeError(f"{len(batch) - len(first)} prompts finished without a token")
    return sorted(first.values()), steps


def long_prompts(engine, args, cfg: dict, budget: int, table: Table) -> None:
    """Part (a) at one budget: a row per batch size."""
    flops = prefill_flops(cfg, args.prompt_len)
    for batch in args.batches:
        seed = 1000 * batch
        ttft_round(engine, prompts(cfg["vocab_size"], batch, args.prompt_len, seed), "warm")
        rounds = [
            ttft_round(
                engine, prompts(cfg["vocab_size"], batch, args.prompt_len, seed + r), f"r{r}"
            )
            for r in range(1, args.reps + 1)
        ]
        p50 = statistics.median(statistics.median(t) for t, _ in rounds)
        last = statistics.median(t[-1] for t, _ in rounds)
        steps = statistics.median(s for _, s in rounds)
        tflops = batch * flops / last / 1e12
        row = table.add(
            budget,
            batch,
            args.prompt_len,
            f"{1e3 * p50:.1f}",
            f"{1e3 * last:.1f}",
            f"{steps:.0f}",
            f"{batch * args.prompt_len / last:.0f}",
            figure(tflops),
            f"{figure(100 * tflops / args.peak_tflops)} %",
        )
        print(row, flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--shape", default="qwen3-4b", choices=sorted(ALL_SHAPES))
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--prompt-len", type=int, default=4096)
    p.add_argument("--batches", default="1,16", help="part (a): prompts queued at once")
    p.add_argument("--reps", type=int, default=3, help="timed rounds (a) and long prompts (b)")
    p.add_argument("--streams", type=int, default=32, help="part (b): running decode streams")
    p.add_argument("--stream-prompt", type=int, default=128, help="the streams' prompt tokens")
    p.add_argument("--decode-steps", type=int, default=64, help="part (b): steps timed alone")
    p.add_argument(
        "--max-num-batched-tokens",
        default=str(Settings.model_fields["max_num_batched_tokens"].default),
        help="token budgets per step, comma-separated (default: the engine's)",
    )
    p.add_argument("--peak-tflops", type=float, default=H200_BF16_DENSE_TFLOPS)
    p.add_argument("--skip-interference", action="store_true")
    args = p.parse_args(argv)
    args.batches = [int(b) for b in args.batches.split(",") if b]
    args.budgets = [int(b) for b in args.max_num_batched_tokens.split(",") if b]
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda without a GPU (use --device cpu --shape tiny)")
    return args


def run(args: argparse.Namespace) -> list[Table]:
    from bench.common.hf_random import hf_random_model, loaded_from_hf, make_engine
    from bench.suites.prefill_interference import (
        interference,
        interference_table,
        streams_kv_tokens,
    )

    cfg = ALL_SHAPES[args.shape]
    hf = hf_random_model(cfg, device=args.device)
    loaded = loaded_from_hf(hf, cfg, args.shape)
    del hf
    kv = max(max(args.batches) * (args.prompt_len + 16), streams_kv_tokens(args, min(args.budgets)))
    engine = make_engine(
        loaded,
        max_num_seqs=max(max(args.batches), args.streams + 1),
        kv_tokens=kv,
        device=args.device,
        max_num_batched_tokens=max(args.budgets),
    )
    where = "H200 dense bf16" if args.device == "cuda" else "the H200's dense bf16, for scale"
    table = Table(
        f"{args.shape}: prompts of {args.prompt_len} tokens queued at once, one output token "
        f"each, median of {args.reps} rounds; MFU against {args.peak_tflops:g} TFLOPS ({where})",
        [
            "max_num_batched_tokens",
            "prompts",
            "prompt tokens",
            "TTFT p50 ms",
            "prefill ms (last TTFT)",
            "engine steps",
            "prefill tok/s",
            "TFLOPS",
            "MFU",
        ],
    )
    print(f"## {table.title}\n{table.header()}", flush=True)
    tables = [table]
    rows = []
    for budget in args.budgets:
        set_budget(engine, budget)
        long_prompts(engine, args, cfg, budget, table)
        if not args.skip_interference:
            rows += interference(engine, args, cfg, budget)
    if rows:
        tables.append(interference_table(args, rows))
        print(tables[-1].markdown(), flush=True)
    return tables


def main() -> None:
    args = parse_args()
    write_results("prefill", run(args))


if __name__ == "__main__":
    main()
