"""Choosing a memory-bound kernel's launch configuration the way a decode step runs it.

A one-token GEMV moves a few megabytes in a few microseconds. Triton's autotuner times one
launch at a time over the same weight: event resolution and launch jitter are the size of the
differences between configurations, the weight may sit in L2, and no launch overlaps the one
before it as programmatic dependent launch makes them do in a decode step. Its picks differ from
one process to the next, and with them a small model's batch-1 decode rate
(bench/results/throughput.md).

Here each configuration runs as one CUDA graph of back-to-back launches over enough distinct
weight copies to overflow the L2 (the step's layers do the same), launched as the step launches
them; the median of a few replays decides. The chain's launches are whatever `run_chain(config)`
queues: the caller builds the copies and knows its kernel.
"""

from __future__ import annotations

import functools
import logging
import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

import torch

log = logging.getLogger("vigil.kernels")

L2_MULTIPLE = 3  # weight bytes per timed chain, in L2 sizes
MAX_COPIES = 160  # enough for SmolLM2's smallest projection (1.1 MB) to pass 3 x 60 MB
REPLAYS = 7


def copies_for(weight_bytes: int, device: torch.device) -> int:
    """Distinct weights one timed chain runs over (the original among them): L2_MULTIPLE L2s'
    worth; a weight that large alone needs no copy."""
    l2 = torch.cuda.get_device_properties(device).L2_cache_size or (50 << 20)
    return max(1, min(MAX_COPIES, math.ceil(L2_MULTIPLE * l2 / max(1, weight_bytes))))


def fastest_over_copies(
    configs: Sequence[Any], weight: torch.Tensor, launch: Callable[[Any, torch.Tensor], object]
) -> Any:
    """The fastest of `configs` for `weight`, each timed as a chain of `launch(config, w)` over
    the weight and enough copies of it to overflow the L2 (at least two launches, so that each
    overlaps the one before, as in a decode step). The copies live only for the timing."""
    copies = copies_for(weight.numel() * weight.element_size(), weight.device)
    weights = [weight] + [weight.clone() for _ in range(copies - 1)]
    launches = weights * (2 if copies == 1 else 1)

    def chain(config: Any) -> None:
        for w in launches:
            launch(config, w)

    return fastest(configs, chain)


def fastest(configs: Sequence[Any], run_chain: Callable[[Any], object]) -> Any:
    """The configuration whose chain replays fastest (median of REPLAYS); configurations that fail
    to compile or launch on this device are skipped."""
    best, best_seconds = None, math.inf
    for config in configs:
        try:
            seconds = graph_seconds(functools.partial(run_chain, config))
        except (
            Exception
        ) as exc:  # out of shared memory or registers for this device: not a candidate
            log.debug("GEMV configuration %s skipped: %s", config, exc)
            continue
        if seconds < best_seconds:
            best, best_seconds = config, seconds
    if best is None:
        raise RuntimeError("no GEMV configuration runs on this device")
    return best


def graph_seconds(fn: Callable[[], object], replays: int = REPLAYS, warmup: int = 1) -> float:
    """Median seconds of one replay of a CUDA graph of what `fn` queues (compiled and warmed up
    on a side stream first, outside the capture)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    graph.replay()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    del graph
    return float(statistics.median(times)) / 1e3
