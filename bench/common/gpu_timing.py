"""Timing helpers for the GPU benches: CUDA events around graph replays (no launch gaps; the
engine's own timer, serving/kernels/gemv_tuning.py) or around plain calls, medians over repeats,
after warm-up."""

from __future__ import annotations

import statistics
from collections.abc import Callable

import torch

from serving.kernels.gemv_tuning import graph_seconds


def time_graph(fn: Callable[[], object], inner: int = 10, repeats: int = 15) -> float:
    """Median seconds of one `fn()` when `inner` calls are captured into one CUDA graph."""

    def calls() -> None:
        for _ in range(inner):
            fn()

    return graph_seconds(calls, replays=repeats, warmup=2) / inner


def time_eager(fn: Callable[[], object], repeats: int = 10, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    return _median_events(fn, repeats)


def _median_events(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def copy_bandwidth(nbytes: int = 2 << 30) -> float:
    """Device-to-device copy, bytes read + written per second (the measured HBM ceiling)."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = time_eager(lambda: dst.copy_(src), repeats=10)
    return 2 * nbytes / t
