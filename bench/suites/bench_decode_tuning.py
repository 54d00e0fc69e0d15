"""The two kernel families of a batched decode step, swept over their launch configurations:

- gemm: every projection of SmolLM2-135M and Qwen3-4B at M decode rows, cuBLAS (F.linear) against
  each candidate of the skinny Triton GEMM (serving/kernels/skinny_gemm.py), timed as the engine's
  tuner times them (a CUDA graph of back-to-back launches over L2-overflowing weight copies);
- attention: the paged decode kernel (serving/kernels/paged_decode.py) at a decode batch and mean
  context, over split count, BLOCK_N, warps and pipeline stages, against its default launch.

Bandwidth is the bytes each must read (weights; the KV of every sequence) over the time, against
4.8 TB/s. Run on the device: `python -m bench.suites.bench_decode_tuning [--only gemm,attention]`.
"""

from __future__ import annotations

import argparse
import itertools

import torch

from bench.common.results_table import Table, write_results
from bench.suites.bench_kernels import paged_case
from serving.kernels import gemv_tuning, skinny_gemm
from serving.kernels.paged_decode import choose_num_splits, decode_launch, paged_decode
from vigil.devtools.model_shapes import SHAPES

HBM = 4.8e12


def projections(shape: dict) -> dict[str, tuple[int, int]]:
    h, heads, kv = shape["hidden_size"], shape["num_attention_heads"], shape["num_key_value_heads"]
    d = shape.get("head_dim") or h // heads
    inter = shape["intermediate_size"]
    return {
        "qkv": ((heads + 2 * kv) * d, h),
        "o": (h, heads * d),
        "gate_up": (2 * inter, h),
        "down": (h, inter),
    }


def _chain_seconds(config, x: torch.Tensor, weights: list[torch.Tensor]) -> float:
    def chain() -> None:
        for w in weights:
            skinny_gemm.run(config, x, w, None)

    return gemv_tuning.graph_seconds(chain, replays=9, warmup=1) / len(weights)


def bench_gemm(rows: list[int]) -> Table:
    table = Table(
        "projections at M decode rows: cuBLAS against the skinny Triton GEMM's best candidate",
        ["shape", "proj", "N x K", "M", "cuBLAS us", "cuBLAS % HBM", "best Triton us",
         "Triton % HBM", "speedup", "best config"],
    )  # fmt: skip
    print(f"\n## {table.title}\n{table.header()}", flush=True)
    for label in ("smollm2-135m", "qwen3-4b"):
        for proj, (n, k) in projections(SHAPES[label]).items():
            w = torch.randn(n, k, device="cuda").to(torch.bfloat16) * 0.02
            copies = gemv_tuning.copies_for(w.numel() * 2, w.device)
            weights = [w] + [w.clone() for _ in range(copies - 1)]
            weights = weights * (2 if copies == 1 else 1)
            for m in rows:
                x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
                timed = {}
                for config in skinny_gemm.CONFIGS:
                    try:
                        timed[str(config)] = (_chain_seconds(config, x, weights), config)
                    except Exception as exc:  # noqa: BLE001 - out of resources: not a candidate
                        print(f"  {config}: {type(exc).__name__}", flush=True)
                cublas = timed.pop(str(skinny_gemm.CUBLAS))[0]
                best_s, best = min(timed.values(), key=lambda v: v[0])
                nbytes = n * k * 2
                kw = best.kwargs
                cfg = f"N{kw['BLOCK_N']} K{kw['BLOCK_K']} split{kw['SPLIT_K']} "
                cfg += f"w{best.num_warps} s{best.num_stages}"
                print(table.add(
                    label, proj, f"{n} x {k}", m, f"{cublas * 1e6:.1f}",
                    f"{100 * nbytes / cublas / HBM:.0f}%", f"{best_s * 1e6:.1f}",
                    f"{100 * nbytes / best_s / HBM:.0f}%", f"{cublas / best_s:.2f}x", cfg,
                ), flush=True)  # fmt: skip
            del weights
            torch.cuda.empty_cache()
    return table


def _attention_seconds(case, splits: int, bn: int, warps: int, stages: int) -> float:
    q, kc, vc, meta, out, d, ctx = case

    def calls() -> None:
        for _ in range(10):
            paged_decode(
                q, kc, vc, meta.block_tables, meta.seq_lens, meta.query_start_loc, out, d**-0.5,
                ctx, num_splits=splits, launch=(bn, warps, stages),
            )  # fmt: skip

    return gemv_tuning.graph_seconds(calls, replays=9) / 10


def bench_attention(cases: list[tuple[int, int]], only_shape: str | None) -> Table:
    table = Table(
        "paged decode attention launch sweep (bf16 KV, block size 16)",
        ["shape (Hq/Hk/D)", "batch", "ctx", "default us", "default % HBM", "default launch",
         "best us", "best % HBM", "speedup", "best launch"],
    )  # fmt: skip
    print(f"\n## {table.title}\n{table.header()}", flush=True)
    shapes = {"qwen3-4b": (32, 8, 128), "smollm2": (9, 3, 64)}
    if only_shape:
        shapes = {only_shape: shapes[only_shape]}
    for (label, (hq, hk, d)), (batch, ctx) in itertools.product(shapes.items(), cases):
        q, kc, vc, meta = paged_case(batch, ctx, 1, hq, hk, d)
        out = torch.empty_like(q)
        nbytes = batch * ctx * hk * d * 2 * 2

        def timed(*launch: int, case=(q, kc, vc, meta, out, d, ctx)) -> float:
            return _attention_seconds(case, *launch)

        splits = choose_num_splits(batch, hk, ctx)
        default = (splits, *decode_launch(d, splits))
        base = timed(*default)
        results = {}
        for launch in itertools.product((1, 2, 4), (32, 64, 128), (4, 8), (1, 2, 3)):
            try:
                results[launch] = timed(*launch)
                us = results[launch] * 1e6
                print(f"  {label} {batch}x{ctx} {launch}: {us:.1f} us", flush=True)
            except Exception as exc:  # noqa: BLE001 - out of shared memory: not a candidate
                print(f"  {launch}: {type(exc).__name__}", flush=True)
        best = min(results, key=results.get)
        fmt = "splits {} BLOCK_N {} w{} s{}"
        print(table.add(
            f"{label} {hq}/{hk}/{d}", batch, ctx, f"{base * 1e6:.1f}",
            f"{100 * nbytes / base / HBM:.0f}%", fmt.format(*default),
            f"{results[best] * 1e6:.1f}", f"{100 * nbytes / results[best] / HBM:.0f}%",
            f"{base / results[best]:.2f}x", fmt.format(*best),
        ), flush=True)  # fmt: skip
    return table


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="gemm,attention")
    parser.add_argument("--rows", default="16,32,64,128")
    parser.add_argument("--cases", default="64:386,256:390,128:640")
    parser.add_argument("--attention-shape", choices=["qwen3-4b", "smollm2"], default=None)
    args = parser.parse_args()
    tables = []
    if "gemm" in args.only:
        tables.append(bench_gemm([int(r) for r in args.rows.split(",")]))
    if "attention" in args.only:
        cases = [tuple(int(v) for v in c.split(":")) for c in args.cases.split(",")]
        tables.append(bench_attention(cases, args.attention_shape))  # type: ignore[arg-type]
    write_results("decode_tuning", tables)


if __name__ == "__main__":
    main()
