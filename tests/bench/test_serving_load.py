"""How the serving benchmark deals jobs to client processes: a closed loop never has more
requests outstanding than its concurrency, whatever the number of processes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bench.workloads.serving_load import split_jobs, workload


@given(num=st.integers(1, 60), workers=st.integers(1, 8), concurrency=st.integers(1, 70))
def test_closed_loop_lanes_sum_to_concurrency_and_every_job_runs_once(num, workers, concurrency):
    jobs = workload("random", num, 1000, 8, 4)
    parts = split_jobs(jobs, workers, concurrency)
    assert all(
        lanes is not None and lanes >= 1 for _, lanes in parts
    )  # no process sends without a lane
    assert sum(lanes for _, lanes in parts) <= concurrency
    assert sorted(j.index for share, _ in parts for j in share) == sorted(j.index for j in jobs)


def test_concurrency_one_is_one_process_one_lane():
    jobs = workload("random", 8, 1000, 8, 4)
    assert split_jobs(jobs, 4, 1) == [(jobs, 1)]


def test_open_loop_deals_round_robin():
    jobs = workload("random", 5, 1000, 8, 4)
    parts = split_jobs(jobs, 2, None)
    assert [len(share) for share, _ in parts] == [3, 2] and all(lanes is None for _, lanes in parts)


@given(
    events=st.lists(st.text(max_size=8), max_size=6),
    cuts=st.lists(st.integers(0, 200), max_size=5),
    crlf=st.booleans(),
)
def test_sse_lines_split_only_at_sse_line_ends_wherever_the_chunks_break(events, cuts, crlf):
    import asyncio
    import json

    from bench.workloads.serving_load import sse_lines

    end = "\r\n" if crlf else "\n"
    lines = [
        f"data: {json.dumps({'text': e}, ensure_ascii=False)}" for e in events
    ]  # raw U+2028, U+0085
    body = "".join(line + end + end for line in lines)
    bounds = sorted({0, len(body), *(c for c in cuts if c < len(body))})
    pieces = [body[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]

    async def texts():
        for piece in pieces:
            yield piece

    async def collect():
        return [line async for line in sse_lines(texts())]

    assert [line for line in asyncio.run(collect()) if line] == lines
