"""Timing helpers for the GPU benches: CUDA events around graph replays (no launch gaps) or
around plain calls, medians over repeats, after warm-up."""

from __future__ import annotations

import statistics
from collections.abc import Callable

import torch


def time_graph(fn: Callable[[], object], inner: int = 10, repeats: int = 15) -> float:
    """Median seconds of one `fn()` when `inner` calls are captured into one CUDA graph."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(inner):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    return _median_events(graph.replay, repeats) / inner


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
