"""How the serving benchmark deals jobs to client processes: a closed loop never has more
requests outstanding than its concurrency, whatever the number of processes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bench.serving_load import split_jobs, workload


@given(num=st.integers(1, 60), workers=st.integers(1, 8), concurrency=st.integers(1, 70))
def test_closed_loop_lanes_sum_to_concurrency_and_every_job_runs_once(num, workers, concurrency):
    jobs = workload("random", num, 1000, 8, 4)
    parts = split_jobs(jobs, workers, concurrency)
    assert all(lanes is not None and lanes >= 1 for _, lanes in parts)  # no process sends without a lane
    assert sum(lanes for _, lanes in parts) <= concurrency
    assert sorted(j.index for share, _ in parts for j in share) == sorted(j.index for j in jobs)


def test_concurrency_one_is_one_process_one_lane():
    jobs = workload("random", 8, 1000, 8, 4)
    assert split_jobs(jobs, 4, 1) == [(jobs, 1)]


def test_open_loop_deals_round_robin():
    jobs = workload("random", 5, 1000, 8, 4)
    parts = split_jobs(jobs, 2, None)
    assert [len(share) for share, _ in parts] == [3, 2] and all(lanes is None for _, lanes in parts)
