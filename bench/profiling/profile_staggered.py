"""What a server's step mix costs the engine on the GPU: a fixed number of streams whose requests
finish at different steps, each finished one replaced at once by a fresh prompt (what a server at
fixed concurrency sees), against the same jobs queued at once (the offline benchmark's waves:
every stream finishes at the same step, so prefills come in one burst and decode steps are pure).

Per step kind (decode only, or decode rows plus a new prompt's prefill): steps, engine step wall
time, the forward's GPU time (CUDA events around it), with async scheduling on and off; with it
off the host's share is the wall minus the GPU time.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict

import torch

from bench.common.results_table import Table
from serving.sampling_params import SamplingParams


class _Timer:
    """Wraps the GPU forward and the runner's launch: step kind and forward GPU span per launch."""

    def __init__(self, engine):
        self.runner, self.gpu = engine.runner, engine.runner.gpu
        self.forward, self.launch = self.gpu.forward, self.runner.launch
        self.kind: str | None = None
        self.events: list[tuple[str, torch.cuda.Event, torch.cuda.Event]] = []

    def __enter__(self):
        def timed_forward(*a, **kw):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            out = self.forward(*a, **kw)
            e.record()
            self.events.append((self.kind or "?", s, e))
            return out

        def timed_launch(out, *a, **kw):
            self.kind = (
                "mixed" if any(item.num_new_tokens > 1 for item in out.scheduled) else "decode"
            )
            return self.launch(out, *a, **kw)

        self.gpu.forward, self.runner.launch = timed_forward, timed_launch
        return self

    def __exit__(self, *exc):
        self.gpu.forward, self.runner.launch = self.forward, self.launch

    def gpu_ms(self) -> dict[str, list[float]]:
        torch.cuda.synchronize()
        by_kind: dict[str, list[float]] = defaultdict(list)
        for kind, s, e in self.events:
            by_kind[kind].append(s.elapsed_time(e))
        self.events.clear()
        return by_kind


def _params(n: int) -> SamplingParams:
    return SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True)


def _staggered(
    engine, timer: _Timer, prompts, streams: int, new: int, steps: int
) -> tuple[dict, float]:
    """`streams` live requests, the first ones ending evenly spread over `new` steps; `steps`
    measured steps after as many warm ones. Returns per-kind step wall ms and output tok/s."""
    count = 0

    def add(max_tokens: int) -> None:
        nonlocal count
        engine.add_request(f"s{count}", prompts[count % len(prompts)], _params(max_tokens))
        count += 1

    for i in range(streams):
        add(1 + (i * new) // streams)
    wall: dict[str, list[float]] = defaultdict(list)
    tokens, start = 0, 0.0
    for step in range(2 * steps):
        if step == steps:
            timer.gpu_ms()
            start, tokens = time.perf_counter(), 0
        before = len(timer.events)
        t0 = time.perf_counter()
        outs = engine.step()
        dt = 1e3 * (time.perf_counter() - t0)
        if step >= steps and len(timer.events) > before:
            wall[timer.events[-1][0]].append(dt)
        for out in outs:
            tokens += len(out.outputs[0].token_ids) if out.finished else 0
            if out.finished:
                add(new)
    rate = tokens / (time.perf_counter() - start)
    for rid in list(engine.requests):
        engine.abort(rid)
    engine.set_async_scheduling(engine.async_scheduling)  # read back a step still in flight
    return wall, rate


def _waves(engine, prompts, streams: int, new: int, waves: int) -> float:
    for i in range(streams * waves):
        engine.add_request(f"w{i}", prompts[i % len(prompts)], _params(new))
    start, tokens = time.perf_counter(), 0
    while engine.has_unfinished_requests():
        for out in engine.step():
            tokens += len(out.outputs[0].token_ids) if out.finished else 0
    return tokens / (time.perf_counter() - start)


def profile_staggered(
    engine, shape_name: str, vocab: int, streams: int, prompt_len: int, new: int, steps: int
) -> tuple[Table, Table]:
    g = torch.Generator().manual_seed(2)
    prompts = [
        torch.randint(0, vocab, (prompt_len,), generator=g).tolist() for _ in range(4 * streams)
    ]
    table = Table(
        f"{streams} streams, prompts of {prompt_len}, {new} tokens each; {steps} steps measured",
        [
            "shape",
            "schedule",
            "async",
            "step kind",
            "steps",
            "step wall ms p50 (mean)",
            "forward GPU ms p50 (mean)",
            "output tok/s",
        ],
    )
    print(table.header(), flush=True)
    waves = _waves(engine, prompts, streams, new, 3)
    print(
        table.add(
            shape_name,
            "waves (offline benchmark)",
            "on" if engine.async_scheduling else "off",
            "all",
            "-",
            "-",
            "-",
            f"{waves:.0f}",
        ),
        flush=True,
    )
    with _Timer(engine) as timer:
        for on in (True, False):
            engine.set_async_scheduling(on)
            wall, rate = _staggered(engine, timer, prompts, streams, new, steps)
            gpu = timer.gpu_ms()
            for kind in ("decode", "mixed"):
                w, f = wall.get(kind, []), gpu.get(kind, [])
                if not w:
                    continue
                print(
                    table.add(
                        shape_name,
                        "staggered",
                        "on" if on else "off",
                        kind,
                        len(w),
                        f"{statistics.median(w):.3f} ({statistics.fmean(w):.3f})",
                        f"{statistics.median(f):.3f} ({statistics.fmean(f):.3f})" if f else "-",
                        f"{rate:.0f}",
                    ),
                    flush=True,
                )
    engine.set_async_scheduling(True)
    return table, _phases(engine, shape_name, prompts, streams, new, steps)


def _phases(engine, shape_name: str, prompts, streams: int, new: int, steps: int) -> Table:
    """Host microseconds per step by phase, staggered, async scheduling on."""
    from bench.profiling.step_phases import StepPhases

    with _Timer(engine) as timer, StepPhases(engine) as phases:
        t0 = time.perf_counter()
        wall, _ = _staggered(engine, timer, prompts, streams, new, steps)
        elapsed = time.perf_counter() - t0
    measured = 2 * steps  # the phases also count the warm half
    table = Table(
        f"{shape_name}, {streams} streams staggered, async on: host microseconds per step by phase "
        "(nested phases indented, counted in their parent too)",
        ["phase", "us per step"],
    )
    print(table.header(), flush=True)
    for name, us in phases.per_step_us(measured).items():
        print(table.add(name, f"{us:.0f}"), flush=True)
    print(table.add("step wall (all)", f"{1e6 * elapsed / measured:.0f}"), flush=True)
    return table
