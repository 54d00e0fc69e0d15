"""Where a decode step's time goes in the engine on the GPU: wall time per engine step vs GPU
busy time per step (CUDA events around the runner's forward), plus torch.profiler's top kernels.

    python -m bench.suites.bench_profile_step --shape qwen3-4b --batch 1

The GPU run times the same engine with async scheduling off and then on (batch-1 tok/s both ways);
with it on, the forward of step t+1 is queued before step t's samples are read back, so the step
wall time can drop to the GPU's forward time.

`--device cpu`: the engine's per-step HOST cost (the Python that caps GPU throughput), measured on
a tiny random model so the forward is small: 256 running sequences, step wall time minus the
model forward, at a short and at a long generated length (O(length) work shows as growth), plus
cProfile's top functions at the long length.

    .venv/bin/python -m bench.suites.bench_profile_step --device cpu [--batch 256|1] [--new 480]

`--prefill N`: instead of decode steps, a lone prompt of N tokens at a time
(bench/profiling/profile_prefill.py):
the engine's time to first token, the prefill's launch host time and forward GPU time.

    python -m bench.suites.bench_profile_step --shape qwen3-4b --prefill 128

`--staggered N`: N streams at fixed concurrency, requests ending at different steps and replaced
at once, as a server sees them, against the same jobs queued at once
(bench/profiling/profile_staggered.py):
decode-only and mixed steps' wall and GPU time.

    python -m bench.suites.bench_profile_step --shape smollm2-135m --staggered 64

`--kernels`: every CUDA kernel of batch decode steps grouped into classes (GEMM, attention,
norm/activation/rotary/elementwise, sampling/logits, memcpy/memset, other) with GPU ms per step,
share, the GEMMs' weight bandwidth and the attention's KV bandwidth against 4.8 TB/s, the step
against its memory roofline, and the top kernels (bench/profiling/profile_kernels.py,
bench/profiling/kernel_classes.py). `--batch` takes several batches, run one after the other on one
engine.

    python -m bench.suites.bench_profile_step --shape qwen3-4b --batch 64,256 --kernels \
        [--context 384]
"""

from __future__ import annotations

import argparse
import time

import torch

from bench.common.hf_random import hf_random_model, loaded_from_hf, make_engine
from bench.common.results_table import Table, write_results
from serving.sampling_params import SamplingParams
from vigil.devtools.model_shapes import SHAPES


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="qwen3-4b")
    parser.add_argument(
        "--batch",
        default=None,
        help="default: 1 on cuda, 256 on cpu; with --kernels several, comma-separated",
    )
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--top", type=int, default=14)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--new", type=int, default=480, help="cpu: generated tokens per sequence")
    parser.add_argument(
        "--prefill", type=int, default=0, help="profile a lone prompt of this many tokens"
    )
    parser.add_argument(
        "--staggered", type=int, default=0, help="profile this many streams at fixed concurrency"
    )
    parser.add_argument(
        "--kernels", action="store_true", help="kernel classes of batch decode steps (GPU)"
    )
    parser.add_argument(
        "--context",
        type=int,
        default=384,
        help="--kernels: mean context of the profiled steps (default: bench_throughput's)",
    )
    args = parser.parse_args()
    batches = [int(b) for b in args.batch.split(",")] if args.batch else []
    if len(batches) > 1 and not args.kernels:
        parser.error("several batches need --kernels")
    if args.kernels and (args.device != "cuda" or args.prefill or args.staggered):
        parser.error("--kernels profiles decode steps on the GPU only")
    args.batch = batches[0] if batches else None
    if args.kernels:
        kernel_breakdown(args.shape, batches or [64], args.steps, args.context, args.top)
        return
    if args.device == "cpu":
        from bench.profiling.profile_host import profile_host

        table = profile_host(batch=args.batch or 256, new=args.new, top=args.top)
        write_results("profile_step", [table])
        return
    args.batch = args.batch or args.staggered or 1
    shape = SHAPES[args.shape]
    hf = hf_random_model(shape)
    loaded = loaded_from_hf(hf, shape, args.shape)
    del hf
    engine = make_engine(loaded, max_num_seqs=args.batch, kv_tokens=args.batch * 1200)
    if args.prefill:
        from bench.profiling.profile_prefill import profile_prefill

        table = profile_prefill(
            engine, args.shape, shape["vocab_size"], args.prefill, reps=10, top=args.top
        )
        write_results("profile_step", [table])
        return
    if args.staggered:
        from bench.profiling.profile_staggered import profile_staggered

        tables = profile_staggered(
            engine, args.shape, shape["vocab_size"], args.staggered, 128, 256, args.steps
        )
        write_results("profile_step", list(tables))
        return
    params = SamplingParams(max_tokens=1000, temperature=0.0, ignore_eos=True)
    g = torch.Generator().manual_seed(0)
    for i in range(args.batch):
        engine.add_request(
            f"r{i}", torch.randint(0, shape["vocab_size"], (128,), generator=g).tolist(), params
        )
    for _ in range(40):  # prefill + graph capture + warm decode
        engine.step()
    gpu_forward = engine.runner.gpu.forward
    events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []

    def timed_forward(*a, **kw):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        out = gpu_forward(*a, **kw)
        e.record()
        events.append((s, e))
        return out

    engine.runner.gpu.forward = timed_forward
    table = Table(
        f"GPU decode step after warm-up, {args.steps} steps, context 128 + ~40",
        [
            "shape",
            "batch",
            "async",
            "engine step ms (wall)",
            "forward ms (GPU)",
            "outside the forward",
            "tok/s",
        ],
    )
    for on in (False, True):
        engine.set_async_scheduling(on)
        engine.step()
        events.clear()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            engine.step()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / args.steps
        fwd = sum(s.elapsed_time(e) for s, e in events) / len(events) / 1e3
        mode = "on" if on else "off"
        print(
            f"## {args.shape} batch {args.batch}, async scheduling {mode}: engine step "
            f"{wall * 1e3:.3f} ms "
            f"wall, model forward (graph replay + input copies) {fwd * 1e3:.3f} ms on the GPU "
            f"-> {100 * (1 - fwd / wall):.0f}% of the step is outside the forward "
            f"(scheduler, step inputs, lm_head, sampler, outputs); {args.batch / wall:.0f} tok/s"
        )
        table.add(
            args.shape,
            args.batch,
            mode,
            f"{wall * 1e3:.3f}",
            f"{fwd * 1e3:.3f}",
            f"{100 * (1 - fwd / wall):.0f}%",
            f"{args.batch / wall:.0f}",
        )
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            engine.step()
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=args.top))
    write_results("profile_step", [table])


def kernel_breakdown(
    shape_name: str, batches: list[int], steps: int, context: int, top: int
) -> None:
    from bench.profiling.kernel_classes import class_table, step_table, top_table
    from bench.profiling.profile_kernels import kv_tokens_needed, profile_batch

    shape = SHAPES[shape_name]
    hf = hf_random_model(shape)
    loaded = loaded_from_hf(hf, shape, shape_name)
    del hf
    engine = make_engine(
        loaded,
        max_num_seqs=max(batches),
        kv_tokens=kv_tokens_needed(max(batches), context, steps),
    )
    profiles, tables = [], []
    for batch in batches:
        p = profile_batch(engine, shape_name, shape, batch, steps, context)
        profiles.append(p)
        for table in (class_table(p), top_table(p, min(top, 10))):
            print(f"## {table.markdown()}\n", flush=True)
            tables.append(table)
    summary = step_table(profiles)
    print(f"## {summary.markdown()}", flush=True)
    write_results("profile_step", [summary, *tables])


if __name__ == "__main__":
    main()
