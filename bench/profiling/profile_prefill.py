"""Where a lone prompt's time to first token goes in the engine on the GPU.

One sequence at a time (batch 1, a fresh prompt each, no prefix-cache hit): the engine's TTFT
(add_request until the step that emits the first token returns), with the prefill replayed from
its CUDA graph and run eagerly, the host time of the prefill's
launch (the Python that queues its kernels), the GPU time of its forward (CUDA events around it),
and torch.profiler's top operators by host time over a few prefills.
"""

from __future__ import annotations

import statistics
import time

import torch

from bench.common.results_table import Table
from serving.sampling_params import SamplingParams


def _ttft_once(engine, prompt: list[int], rid: str) -> float:
    params = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
    t0 = time.perf_counter()
    engine.add_request(rid, prompt, params)
    first = None
    while engine.has_unfinished_requests():
        outs = engine.step()
        if first is None and any(o.request_id == rid and o.outputs[0].token_ids for o in outs):
            first = time.perf_counter() - t0
    if first is None:
        raise RuntimeError("the request finished without a token")
    return first


def profile_prefill(
    engine, shape_name: str, vocab: int, prompt_len: int, reps: int, top: int
) -> Table:
    gpu = engine.runner.gpu
    launch = engine.runner.launch
    host_ms: list[float] = []
    gpu_events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
    forward = gpu.forward

    def timed_forward(ids, pos, meta):
        if ids.shape[0] < prompt_len:
            return forward(ids, pos, meta)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        out = forward(ids, pos, meta)
        e.record()
        gpu_events.append((s, e))
        return out

    def timed_launch(out, *a, **kw):
        prefill = any(item.num_new_tokens > 1 for item in out.scheduled)
        t0 = time.perf_counter()
        result = launch(out, *a, **kw)
        if prefill:
            host_ms.append(1e3 * (time.perf_counter() - t0))
        return result

    g = torch.Generator().manual_seed(1)
    modes = [(False, True), (True, False), (True, True)]  # (prefill graphs, async scheduling)
    prompts = [
        torch.randint(0, vocab, (prompt_len,), generator=g).tolist()
        for _ in range(len(modes) * (reps + 1) + 3)
    ]
    buckets = gpu.prefill_buckets
    gpu.forward, engine.runner.launch = timed_forward, timed_launch
    table = Table(
        f"lone prompt of {prompt_len} tokens, {reps} prompts each way",
        [
            "shape",
            "prefill",
            "async",
            "engine TTFT ms p50 (min)",
            "prefill launch host ms p50",
            "prefill forward GPU ms p50",
        ],
    )
    try:
        for graphs, on in modes:
            gpu.prefill_buckets = buckets if graphs else ()
            engine.set_async_scheduling(on)
            _ttft_once(engine, prompts.pop(), "warm")
            host_ms.clear()
            gpu_events.clear()
            ttft = [
                1e3 * _ttft_once(engine, prompts.pop(), f"p{graphs}{on}{i}") for i in range(reps)
            ]
            torch.cuda.synchronize()
            fwd = [s.elapsed_time(e) for s, e in gpu_events]
            row = table.add(
                shape_name,
                "graph" if graphs and buckets else "eager",
                "on" if on else "off",
                f"{statistics.median(ttft):.2f} ({min(ttft):.2f})",
                f"{statistics.median(host_ms):.2f}",
                f"{statistics.median(fwd):.2f}",
            )
            print(row, flush=True)
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for i in range(3):
                _ttft_once(engine, prompts.pop(), f"prof{i}")
            torch.cuda.synchronize()
        averages = prof.key_averages()
        print(averages.table(sort_by="self_cpu_time_total", row_limit=top))
        print(averages.table(sort_by="self_cuda_time_total", row_limit=top))
    finally:
        gpu.forward, engine.runner.launch = forward, launch
        gpu.prefill_buckets = buckets
    return table
