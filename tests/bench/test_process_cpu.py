"""bench/common/process_cpu.py: /proc CPU readings of the server's API processes."""

from __future__ import annotations

import os
import sys
import time

import pytest

from bench.common.process_cpu import api_pids, cpu_seconds, total_cpu_seconds
from bench.suites.bench_serving import api_cpu

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@linux
def test_cpu_seconds_grow_while_this_process_burns_cpu():
    before = cpu_seconds(os.getpid())
    end = time.process_time() + 0.2
    while time.process_time() < end:
        pass
    after = cpu_seconds(os.getpid())
    assert before is not None and after is not None
    assert 0.1 <= after - before <= 5.0


def test_a_missing_process_reads_none():
    assert cpu_seconds(2**22 + 12345) is None
    assert total_cpu_seconds([os.getpid(), 2**22 + 12345]) is None
    assert total_cpu_seconds([]) is None


def test_one_api_process_is_the_server_itself():
    assert api_pids(4242, 1, "http://127.0.0.1:1") == [4242]  # no request needed


def test_api_cpu_per_thousand_streamed_tokens():
    summary = {"output_tok_s": 1000.0, "wall_s": 4.0}  # 4,000 tokens
    assert api_cpu(10.0, 12.0, summary) == {"api_cpu_s": 2.0, "api_cpu_s_per_1k_tok": 0.5}
    assert api_cpu(None, 12.0, summary)["api_cpu_s_per_1k_tok"] is None
    assert api_cpu(1.0, 2.0, {"output_tok_s": 0.0, "wall_s": 4.0})["api_cpu_s"] is None


def test_tokens_per_event_counts_coalesced_outputs():
    from bench.workloads.serving_load import summarize

    results = [
        {"start": 0.0, "end": 1.0, "stamps": [0.1, 0.2], "tokens": 4, "error": None},
        {"start": 0.0, "end": 1.0, "stamps": [0.1, 0.2, 0.3, 0.4], "tokens": 4, "error": None},
    ]
    assert summarize(results)["tokens_per_event"] == round(8 / 6, 3)
