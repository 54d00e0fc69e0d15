"""bench_serving's peer: the same jobs through the offline engine (LLMEngine) in the benchmark's
process, with the served engine core's settings, reading finished outputs only, as an offline
caller does (vLLM's LLM.generate)."""

from __future__ import annotations

import gc
import time

from bench.common.pinned_host import pinned, spread
from bench.workloads.serving_load import Job


def offline(args, jobs: list[Job], max_num_seqs: int) -> dict:
    """The same jobs through LLMEngine in this process, as fast as it steps, `args.offline_repeats`
    times on one engine, on fixed CPUs (bench/common/pinned_host.py): the best pass is the figure
    the served run is compared with (the conservative side); the spread between passes is kept."""
    from serving.engine import EngineConfig, build_engine
    from serving.heap import freeze_startup_heap
    from serving.sampling_params import SamplingParams
    from vigil.config import load_settings

    settings = load_settings(
        device=args.device,
        max_num_seqs=max_num_seqs,
        kv_cache_memory_mb=args.kv_cache_mb,
        model_path=args.model,
        torch_threads=args.torch_threads,
    )
    engine = build_engine(EngineConfig.from_settings(settings))
    # as the served engine core does before it is ready: no full collections over it
    freeze_startup_heap()
    warm = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True)
    engine.add_request("warm", jobs[0].prompt_ids, warm)
    while engine.has_unfinished_requests():
        engine.step()
    with pinned(threads=None):  # fixed CPUs: no migration between passes and runs
        passes = [
            _offline_pass(engine, jobs, f"p{i}-") for i in range(max(1, args.offline_repeats))
        ]
    gc.unfreeze()
    del engine  # its weights and KV cache, before the next offline engine takes the memory
    gc.collect()
    if args.device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()
    best = max(passes, key=lambda p: p["output_tok_s"])
    rates = [p["output_tok_s"] for p in passes]
    return {**best, "passes_tok_s": [round(r, 1) for r in rates], "pass_spread": spread(rates)}


def _offline_pass(engine, jobs: list[Job], prefix: str) -> dict:
    from serving.sampling_params import RequestOutputKind, SamplingParams

    start, tokens = time.perf_counter(), 0
    for job in jobs:
        engine.add_request(
            f"{prefix}{job.index}",
            job.prompt_ids,
            SamplingParams(
                max_tokens=job.max_tokens,
                temperature=0.0,
                ignore_eos=True,
                output_kind=RequestOutputKind.FINAL_ONLY,  # results read at the end
            ),
        )
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                tokens += len(out.outputs[0].token_ids)
    wall = time.perf_counter() - start
    return {"output_tok_s": tokens / wall, "wall_s": wall, "tokens": tokens}
