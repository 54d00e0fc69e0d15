"""Stable reference figures: an offline engine timed on a fixed set of CPUs with a fixed number
of torch threads (no migration between cores, no thread-count drift between runs), several passes,
and the spread between passes printed with every figure and every ratio taken against it.

A host-bound engine step (a small model at batch) moves with whatever else the host runs; a
figure without its spread cannot tell a 10 % gain from the next run's noise."""

from __future__ import annotations

import contextlib
import os
import statistics
from collections.abc import Iterator

import torch

PINNED_CPUS = 2  # the engine's Python thread and the CUDA driver's threads


def pin_set(count: int = PINNED_CPUS) -> list[int]:
    """The last `count` CPUs this process may run on (away from CPU 0, which takes most
    interrupts); all of them when there are no more."""
    try:
        usable = sorted(os.sched_getaffinity(0))
    except AttributeError:  # no affinity masks on this platform
        return []
    return usable[-count:] if len(usable) > count else usable


@contextlib.contextmanager
def pinned(threads: int | None = 1, cpus: list[int] | None = None) -> Iterator[str]:
    """Run the block on `cpus` (default `pin_set()`) with `threads` torch intra-op threads, then
    restore both. Yields a description for the results header."""
    old_threads = torch.get_num_threads()
    old_cpus = None
    chosen = pin_set() if cpus is None else cpus
    if chosen and hasattr(os, "sched_setaffinity"):
        old_cpus = os.sched_getaffinity(0)
        os.sched_setaffinity(0, chosen)
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield f"CPUs {chosen or 'all'}, {torch.get_num_threads()} torch threads"
    finally:
        if threads is not None:
            torch.set_num_threads(old_threads)
        if old_cpus is not None:
            os.sched_setaffinity(0, old_cpus)


def spread(values: list[float]) -> float:
    """(slowest - fastest) / median of the passes: 0 for one pass."""
    if len(values) < 2:
        return 0.0
    return (max(values) - min(values)) / statistics.median(values)


def with_spread(value: float, passes: list[float]) -> str:
    """`value` (a figure or a ratio against the passes' median) with the passes' spread."""
    return f"{value:.2f} ±{50 * spread(passes):.0f}%"
