"""Every CUDA kernel of the engine's batch decode steps, grouped into classes against the memory
roofline (bench/profiling/kernel_classes.py): what a step at 64 or 256 sequences spends its GPU
time on.

Per batch: `batch` random prompts, sized so that the measured steps run at `context` tokens of
mean context (the throughput benchmark's 128 + 512 / 2 = 384 by default); prefill until every
sequence decodes, a few decode steps of warm-up, then `steps` steps timed without the profiler
(the step wall time: async scheduling as the engine runs it) and `steps` more under
torch.profiler (CUDA activity only: the kernels, those replayed from CUDA graphs included).
"""

from __future__ import annotations

import time

import torch

from bench.profiling.kernel_classes import Kernel, StepProfile
from serving.sampling_params import SamplingParams

WARM_DECODE = 8  # decode steps after the prefill, before anything is timed


def kv_tokens_needed(batch: int, context: int, steps: int) -> int:
    """KV tokens the engine needs for `batch` sequences profiled at `context`."""
    return batch * (context + 2 * steps + 2 * WARM_DECODE + 64)


def kernels_from(prof) -> list[Kernel]:
    """The device events of a torch.profiler run: kernels, memcpys and memsets."""
    from torch.autograd import DeviceType

    return [
        Kernel(e.name, float(e.time_range.start), float(e.time_range.end))
        for e in prof.events()
        if e.device_type == DeviceType.CUDA
    ]


def _sync(engine) -> None:
    if engine.device.type == "cuda":
        torch.cuda.synchronize()


def _mean_context(engine) -> float:
    running = engine.scheduler.running
    return sum(s.num_tokens for s in running) / max(1, len(running))


def profile_batch(engine, shape_name: str, shape: dict, batch: int, steps: int, context: int):
    """One StepProfile of `batch` decoding sequences; the engine is left empty (reset)."""
    from torch.profiler import ProfilerActivity, profile

    prompt_len = max(16, context - WARM_DECODE - steps - 1)
    params = SamplingParams(
        max_tokens=2 * steps + 2 * WARM_DECODE + 32, temperature=0.0, ignore_eos=True
    )
    g = torch.Generator().manual_seed(batch)
    ids = [f"kernels-{batch}-{i}" for i in range(batch)]
    for rid in ids:
        prompt = torch.randint(0, shape["vocab_size"], (prompt_len,), generator=g).tolist()
        engine.add_request(rid, prompt, params)
    started: set[str] = set()
    while len(started) < batch:  # prefill, chunked by the token budget, until all decode
        started.update(o.request_id for o in engine.step() if o.outputs[0].token_ids)
    for _ in range(WARM_DECODE):
        engine.step()
    context_before = _mean_context(engine)
    _sync(engine)
    t0 = time.perf_counter()
    for _ in range(steps):
        engine.step()
    _sync(engine)
    wall_ms = 1e3 * (time.perf_counter() - t0) / steps
    # a CPU engine (the tests) has no kernels to record: its run checks the steps around them
    activity = ProfilerActivity.CUDA if engine.device.type == "cuda" else ProfilerActivity.CPU
    with profile(activities=[activity]) as prof:
        for _ in range(steps):
            engine.step()
        _sync(engine)
    running = len(engine.scheduler.running)
    mean_context = (context_before + _mean_context(engine)) / 2
    kernels = kernels_from(prof)
    for rid in ids:
        engine.abort(rid)
    engine.set_async_scheduling(engine.async_scheduling)  # reads back a step still in flight
    engine.reset()
    if running != batch:
        raise RuntimeError(f"{running} sequences ran at the end, not {batch}: raise max_tokens")
    if not kernels:
        raise RuntimeError("the profiler recorded no CUDA kernels")
    return StepProfile(shape_name, shape, batch, steps, mean_context, wall_ms, kernels)
