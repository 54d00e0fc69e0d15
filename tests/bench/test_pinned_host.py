"""The benchmarks' pinned reference: the block runs on the chosen CPUs with the chosen torch
threads and both are restored after; the spread is (slowest - fastest) / median."""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from bench.common.pinned_host import pin_set, pinned, spread, with_spread


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity masks")
def test_the_block_runs_pinned_and_the_process_is_restored():
    before_cpus, before_threads = os.sched_getaffinity(0), torch.get_num_threads()
    one = [max(before_cpus)]
    with pinned(threads=1, cpus=one) as described:
        assert os.sched_getaffinity(0) == set(one) and torch.get_num_threads() == 1
        assert str(one) in described
    assert os.sched_getaffinity(0) == before_cpus and torch.get_num_threads() == before_threads
    assert set(pin_set()) <= before_cpus and len(pin_set()) == min(2, len(before_cpus))


@given(st.lists(st.floats(1.0, 1e6), min_size=2, max_size=9))
def test_spread_is_the_range_over_the_median(values):
    ordered = sorted(values)
    n = len(ordered)
    median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    assert spread(values) == pytest.approx((ordered[-1] - ordered[0]) / median)


def test_one_pass_has_no_spread_and_ratios_print_half_the_range():
    assert spread([5.0]) == 0.0
    assert with_spread(0.9, [95.0, 100.0, 105.0]) == "0.90 ±5%"
