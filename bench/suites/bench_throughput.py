"""Offline decode throughput on the GPU: our engine vs HF transformers `generate`, same
random-weight model (real configs of SmolLM2-135M, Qwen3-0.6B, Qwen3-4B), same process.

Per shape and batch: `batch` prompts of 128 random tokens, 512 new tokens each, greedy, EOS
ignored. Prints engine tok/s (prefill included, graphs captured in a warm-up), HF tok/s, the ratio,
and the engine's share of the HBM roofline: bytes per decode step = all weights + every
sequence's KV at the mean context (128 + 512/2), over 4.8 TB/s.

HF `generate` runs `--hf-new` tokens (default 64, not 512, to fit the device budget); its
per-token cost barely depends on the context at these lengths. The engine runs without a
tokenizer (no detokenization), like HF's token-id generate. Each batch runs with async scheduling
off and on (`--async-scheduling both`, the default), on the same engine one after the other.
Each row is the median of `--passes` timed passes (default 3) on fixed CPUs
(bench/common/pinned_host.py),
with the pass-to-pass spread, (slowest - fastest) / median, beside it. As an offline caller, the
engine hands out finished outputs only (`--outputs final`; `cumulative`: every step's, as a
streaming caller reads them), and the start-up heap is frozen out of full garbage collections
once the engine is built, as in the served engine core (`--freeze-heap off` to compare).

    python -m bench.suites.bench_throughput [--shapes ...] [--batches 1,16,64,256] [--json F]
    python -m bench.suites.bench_throughput --device cuda --shapes gemma4-12b-like --batches 1,16,64
      (per-layer geometry: sliding layers 256 wide, full layers 512 wide with one KV head; the
      roofline counts each sliding layer's KV up to its window)
    python -m bench.suites.bench_throughput --device cuda --shapes smollm2-135m,qwen3-4b \
        --batches 1 --no-hf

A mixture of experts (`qwen3-30b-a3b`: 128 experts, top-8; the experts run as the Triton grouped
GEMM) reads, per decode step, attention, the routers and only the experts the batch routes to: the
roofline counts the experts expected under uniform routing, E * (1 - (1 - k/E)^batch) per layer
(8 at batch 1, ~82 at 16, all 128 from ~64 on; vigil/devtools/model_shapes.py).

    python -m bench.suites.bench_throughput --shapes qwen3-30b-a3b --batches 1,16,64,256 --no-hf

`--weights host` makes the random weights on the host (serving/loader/random_weights.py) and
lets the engine move them, with no HF model: for shapes whose weights would not fit the GPU twice
(gpt-oss-20b-like: its experts are converted from the HF layout at load). Shapes of several
KV-cache groups (gemma4-12b-like, gpt-oss-20b-like) run eagerly, without CUDA graphs.

    python -m bench.suites.bench_throughput --shapes gpt-oss-20b-like --batches 1,16,64 \
        --weights host

With `--tensor-parallel-size N` (N > 1) each shape runs at TP=1 and TP=N side by side on the
same random weights (made on the GPUs, no HF model), except the `--tp-only-shapes` (default
qwen3-32b), which run at TP=N alone; the roofline counts N GPUs' bandwidth. Both sizes run with
async scheduling on (off with `--async-scheduling off`); `--tp-allreduce` picks the layers'
all-reduce, and each engine prints which one it uses.

    python -m bench.suites.bench_throughput --tensor-parallel-size 2 --shapes qwen3-4b,qwen3-32b \
        --batches 1,64
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from pathlib import Path

import torch

from bench.common.hf_random import hf_random_model, loaded_from_hf, make_engine
from bench.common.pinned_host import pinned, spread
from bench.common.results_table import Table, write_results
from bench.common.roofline import HBM_BYTES_PER_S, decode_step_bytes
from serving.heap import freeze_startup_heap
from serving.kernels import gemv as gemv_kernels
from serving.kernels import pdl, skinny_gemm
from serving.sampling_params import RequestOutputKind, SamplingParams
from vigil.devtools.model_shapes import SHAPES

COLUMNS = [
    "shape",
    "batch",
    "Triton projections",
    "PDL",
    "norm in GEMV up to",
    "async",
    "outputs",
    "heap",
    "engine tok/s",
    "HF tok/s",
    "engine/HF",
    "roofline tok/s",
    "% roofline",
    "pass spread",
]


def run_engine(
    engine, prompts: list[list[int]], new_tokens: int, outputs: str = "final"
) -> tuple[float, int]:
    """`outputs`: "final" (only finished requests' outputs, as an offline caller reads them) or
    "cumulative" (every advanced request's output each step, as a streaming caller reads them)."""
    kind = RequestOutputKind.FINAL_ONLY if outputs == "final" else RequestOutputKind.CUMULATIVE
    params = SamplingParams(
        max_tokens=new_tokens, temperature=0.0, ignore_eos=True, output_kind=kind
    )
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i, p in enumerate(prompts):
        engine.add_request(f"r{time.monotonic_ns()}-{i}", p, params)
    generated = 0
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                generated += len(out.outputs[0].token_ids)
    torch.cuda.synchronize()
    return time.perf_counter() - t0, generated


def run_hf(model, prompts: list[list[int]], new_tokens: int) -> float:
    ids = torch.tensor(prompts, device="cuda")
    mask = torch.ones_like(ids)
    kw = {"max_new_tokens": new_tokens, "min_new_tokens": new_tokens, "do_sample": False}
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=mask, **kw)
    torch.cuda.synchronize()
    assert out.shape[1] == ids.shape[1] + new_tokens
    return time.perf_counter() - t0


def bench_shape(name: str, batches: list[int], args, rows: list[dict], table: Table) -> None:
    shape = SHAPES[name]
    if args.weights == "host":  # no HF model: nothing to compare with
        from serving.loader.random_weights import random_loaded

        hf, loaded = None, random_loaded(shape, device="cpu", dtype=torch.bfloat16, name=name)
    else:
        hf = hf_random_model(shape)
        loaded = loaded_from_hf(hf, shape, name)
    kv_tokens = max(batches) * (args.prompt + args.new + 16)
    engine = make_engine(
        loaded, max_num_seqs=max(batches), kv_tokens=kv_tokens, kv_cache_dtype=args.kv_cache_dtype
    )
    if args.freeze_heap == "on":  # as the served engine core does once ready (serving/heap.py)
        freeze_startup_heap()
    g = torch.Generator().manual_seed(0)
    modes = {"both": [False, True], "on": [True], "off": [False]}[args.async_scheduling]
    output_modes = {"both": ["cumulative", "final"]}.get(args.outputs, [args.outputs])
    default_norm = gemv_kernels.MAX_FUSED_NORM_FEATURES
    for batch in batches:
        # the one-token GEMV at batch 1, the skinny GEMM up to its row limit, cuBLAS above
        gemv_modes = (
            {"both": [False, True], "on": [True], "off": [False]}[args.gemv]
            if batch <= skinny_gemm.MAX_ROWS
            else [True]
        )
        pdl_modes = {"both": ["off", "auto"], "on": ["auto"], "off": ["off"]}[
            args.programmatic_launch
        ]
        prompts = torch.randint(0, shape["vocab_size"], (batch, args.prompt), generator=g).tolist()
        run_engine(engine, prompts, 8)  # warm-up: compiles kernels, captures this batch's graph
        hf_tps = None
        if hf is not None and not args.no_hf:
            run_hf(hf, prompts[: min(batch, 4)], 4)  # warm-up
            hf_tps = batch * args.hf_new / run_hf(hf, prompts, args.hf_new)
        kv_elem = 1 if args.kv_cache_dtype == "fp8" else 2
        step_bytes = decode_step_bytes(shape, batch, args.prompt + args.new / 2, kv_elem)
        roof = batch * HBM_BYTES_PER_S / step_bytes
        norm_limits = (
            [int(v) for v in args.fused_norm_max.split(",")] if batch == 1 else [default_norm]
        )
        for use_gemv, pdl_mode, norm_limit in [
            (g, p, m) for g in gemv_modes for p in pdl_modes for m in norm_limits
        ]:
            gemv_kernels.ENABLED = skinny_gemm.ENABLED = use_gemv
            gemv_kernels.MAX_FUSED_NORM_FEATURES = norm_limit
            pdl.set_mode(pdl_mode)
            # recaptured with this projection path and launch mode
            if engine.runner.gpu is not None:  # None: several KV-cache groups run eagerly
                engine.runner.gpu.release_graphs()
            run_engine(engine, prompts, 8)
            pdl_label = "on" if pdl.enabled(torch.device("cuda")) else "off"
            for on, outputs in [(a, o) for a in modes for o in output_modes]:
                engine.set_async_scheduling(on)
                passes = []
                with pinned(threads=None):  # the engine's threads as set; its CPUs fixed
                    for _ in range(max(1, args.passes)):
                        t, generated = run_engine(engine, prompts, args.new, outputs)
                        assert generated == batch * args.new, (generated, batch * args.new)
                        passes.append(generated / t)
                ours = statistics.median(passes)
                row = {
                    "shape": name,
                    "batch": batch,
                    "kv": args.kv_cache_dtype,
                    "async_scheduling": on,
                    "outputs": outputs,
                    "heap": args.freeze_heap,
                    "triton_projections": use_gemv and batch <= skinny_gemm.MAX_ROWS,
                    "pdl": pdl_label,
                    "fused_norm_max": norm_limit,
                    "engine_tok_s": ours,
                    "hf_tok_s": hf_tps,
                    "ratio": ours / hf_tps if hf_tps else None,
                    "roofline_tok_s": roof,
                    "roofline_share": ours / roof,
                    "engine_s": t,
                    "passes_tok_s": [round(p, 1) for p in passes],
                    "pass_spread": spread(passes),
                }
                rows.append(row)
                ratio = f"{ours / hf_tps:.1f}x" if hf_tps else "-"
                hf_s = f"{hf_tps:.0f}" if hf_tps else "-"
                label = name + (" fp8-kv" if args.kv_cache_dtype == "fp8" else "")
                print(
                    table.add(
                        label,
                        batch,
                        ("on" if use_gemv else "off") if batch <= skinny_gemm.MAX_ROWS else "-",
                        pdl_label,
                        norm_limit,
                        "on" if on else "off",
                        outputs,
                        "frozen" if args.freeze_heap == "on" else "unfrozen",
                        f"{ours:.0f}",
                        hf_s,
                        ratio,
                        f"{roof:.0f}",
                        f"{100 * ours / roof:.0f}%",
                        f"{100 * spread(passes):.1f}%",
                    ),
                    flush=True,
                )
        gemv_kernels.ENABLED = skinny_gemm.ENABLED = True
        gemv_kernels.MAX_FUSED_NORM_FEATURES = default_norm
        pdl.set_mode("auto")
    if args.freeze_heap == "on":
        gc.unfreeze()
    del engine, hf, loaded
    gc.collect()
    torch.cuda.empty_cache()


TP_COLUMNS = [
    "shape",
    "TP",
    "batch",
    "async",
    "all-reduce",
    "engine tok/s",
    "vs TP=1",
    "roofline tok/s",
    "% roofline",
    "all-reduce % of GPU time",
]
# kernel names of the all-reduces (and the logits all-gather): NCCL's, and the symmetric-memory
# one-shot
COLLECTIVE_KERNELS = ("nccl", "all_reduce")


def allreduce_share(engine, prompts: list[list[int]], new_tokens: int = 32) -> float | None:
    """Rank 0's collective kernel time (NCCL's and the one-shot all-reduce's) over all its kernel
    time for a short run (the kernels inside replayed CUDA graphs included). It counts a rank's
    wait for the slower peer too."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run_engine(engine, prompts, new_tokens)
    kernels = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
    total = sum(e.time_range.elapsed_us() for e in kernels)
    nccl = sum(
        e.time_range.elapsed_us()
        for e in kernels
        if any(k in e.name.lower() for k in COLLECTIVE_KERNELS)
    )
    return nccl / total if total else None


def bench_tp_shape(name: str, batches: list[int], args, rows: list[dict], table: Table) -> None:
    from bench.targets.tp_engines import make_tp_engine

    shape = SHAPES[name]
    sizes = (
        [args.tensor_parallel_size]
        if name in args.tp_only_shapes.split(",")
        else [1, args.tensor_parallel_size]
    )
    tp_async = (
        "off" if args.async_scheduling == "off" else "on"
    )  # TP rows: one mode, the same at TP=1 and TP=N
    base: dict[int, float] = {}
    g = torch.Generator().manual_seed(0)
    prompts_by_batch = {
        b: torch.randint(0, shape["vocab_size"], (b, args.prompt), generator=g).tolist()
        for b in batches
    }
    for tp in sizes:
        kv_tokens = max(batches) * (args.prompt + args.new + 16)
        engine = make_tp_engine(
            shape,
            tp=tp,
            max_num_seqs=max(batches),
            kv_tokens=kv_tokens,
            kv_cache_dtype=args.kv_cache_dtype,
            async_scheduling=tp_async,
            tp_allreduce=args.tp_allreduce,
        )
        reduce_name = (
            engine.tensor_parallel.all_reduce_name if engine.tensor_parallel is not None else "-"
        )
        print(
            f"# TP={tp}: async scheduling {'on' if engine.async_scheduling else 'off'}, all-reduce "
            f"{reduce_name}",
            flush=True,
        )
        try:
            for batch in batches:
                prompts = prompts_by_batch[batch]
                run_engine(engine, prompts, 8)  # warm-up: kernels, this batch's graph
                t, generated = run_engine(engine, prompts, args.new)
                assert generated == batch * args.new, (generated, batch * args.new)
                ours = generated / t
                if tp == 1:
                    base[batch] = ours
                kv_elem = 1 if args.kv_cache_dtype == "fp8" else 2
                roof = (
                    tp
                    * batch
                    * HBM_BYTES_PER_S
                    / decode_step_bytes(shape, batch, args.prompt + args.new / 2, kv_elem)
                )
                vs = f"{ours / base[batch]:.2f}x" if batch in base and tp > 1 else "-"
                share = allreduce_share(engine, prompts) if tp > 1 and not args.no_profile else None
                rows.append(
                    {
                        "shape": name,
                        "tp": tp,
                        "batch": batch,
                        "async_scheduling": engine.async_scheduling,
                        "all_reduce": reduce_name,
                        "engine_tok_s": ours,
                        "roofline_tok_s": roof,
                        "roofline_share": ours / roof,
                        "engine_s": t,
                        "allreduce_share": share,
                    }
                )
                print(
                    table.add(
                        name,
                        tp,
                        batch,
                        "on" if engine.async_scheduling else "off",
                        reduce_name,
                        f"{ours:.0f}",
                        vs,
                        f"{roof:.0f}",
                        f"{100 * ours / roof:.0f}%",
                        "-" if share is None else f"{100 * share:.1f}%",
                    ),
                    flush=True,
                )
        finally:
            engine.close()
            del engine
            gc.collect()
            torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default="smollm2-135m,qwen3-0.6b,qwen3-4b")
    parser.add_argument("--batches", default="1,16,64,256")
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--new", type=int, default=512)
    parser.add_argument("--hf-new", type=int, default=64)
    parser.add_argument("--no-hf", action="store_true")
    parser.add_argument(
        "--weights",
        default="hf",
        choices=["hf", "host"],
        help="hf: an HF model's random weights on the GPU; host: made on the host, no HF model",
    )
    parser.add_argument(
        "--passes",
        type=int,
        default=3,
        help="timed passes per row on fixed CPUs: the median is reported, with (max-min)/median",
    )
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--outputs",
        default="final",
        choices=["final", "cumulative", "both"],
        help="what the engine hands out per request: the finished output only (an offline "
        "caller, vLLM's LLM.generate) or every step's cumulative output (a streaming caller)",
    )
    parser.add_argument(
        "--freeze-heap",
        default="on",
        choices=["on", "off"],
        help="freeze the start-up heap out of full garbage collections once the engine is "
        "built, as the served engine core does (serving/heap.py)",
    )
    parser.add_argument("--kv-cache-dtype", default="auto", choices=["auto", "fp8"])
    parser.add_argument("--async-scheduling", default="both", choices=["both", "on", "off"])
    parser.add_argument(
        "--gemv",
        default="on",
        choices=["both", "on", "off"],
        help="projections as Triton kernels (batch 1: the GEMV, serving/kernels/gemv.py; up to "
        "skinny_gemm.MAX_ROWS: the skinny GEMM, tuned against cuBLAS) or cuBLAS alone",
    )
    parser.add_argument(
        "--programmatic-launch",
        default="on",
        choices=["both", "on", "off"],
        help="decode kernels launched with programmatic dependent launch (serving/kernels/pdl.py)",
    )
    parser.add_argument(
        "--fused-norm-max",
        default=str(gemv_kernels.MAX_FUSED_NORM_FEATURES),
        help="batch 1: RMSNorm read inside the GEMV for rows up to this many features, "
        "comma-separated values each run (serving/kernels/gemv.py)",
    )
    parser.add_argument(
        "--device", default="cuda", choices=["cuda"], help="the engine's device (GPU only)"
    )
    parser.add_argument("--tensor-parallel-size", type=int, default=1)
    parser.add_argument("--tp-only-shapes", default="qwen3-32b", help="shapes run at TP=N only")
    parser.add_argument(
        "--no-profile", action="store_true", help="TP rows: skip the all-reduce share profile"
    )
    parser.add_argument(
        "--tp-allreduce",
        default="auto",
        choices=["auto", "nccl", "symm_mem"],
        help="TP rows: the layers' all-reduce (serving/distributed/all_reduce.py)",
    )
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    if args.tensor_parallel_size > 1:
        title = (
            f"tensor parallel: prompt {args.prompt} + {args.new} new tokens, "
            f"KV {args.kv_cache_dtype}"
        )
        device = f"{torch.cuda.get_device_name()} x{torch.cuda.device_count()}"
        table, bench_one, name = Table(title, TP_COLUMNS), bench_tp_shape, "throughput_tp"
    else:
        title = (
            f"prompt {args.prompt} + {args.new} new tokens (HF generate: {args.hf_new} new), "
            f"KV {args.kv_cache_dtype}"
        )
        device = torch.cuda.get_device_name()
        table, bench_one, name = Table(title, COLUMNS), bench_shape, "throughput"
    print(f"# {device}; {title}")
    print(table.header())
    rows: list[dict] = []
    for shape in args.shapes.split(","):
        bench_one(shape, batches, args, rows, table)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    write_results(name, [table])


if __name__ == "__main__":
    main()
