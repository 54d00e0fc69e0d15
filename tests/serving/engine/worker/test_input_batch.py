"""The persistent `InputBatch` against the step rebuilt from scratch (`build_step_inputs`): on
random workloads (arrivals over time, finishes by length and by abort, preemptions from a small
KV pool, copy-on-write forks, chunked prefill under small token budgets, prefix-cache hits, with
and without async scheduling) every step hands the runner identical inputs."""

from __future__ import annotations

import pytest
import torch
from engine_fixtures import make_engine, save_tiny_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from serving.engine.worker.input_batch import InputBatch
from serving.engine.worker.step_inputs import StepInputs, build_step_inputs
from serving.loader import load_model_files
from serving.sampling_params import SamplingParams

META_TENSORS = ("query_start_loc", "seq_lens", "slot_mapping", "block_tables")
META_VALUES = ("max_query_len", "max_seq_len", "num_decode_tokens", "query_lens_cpu")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp("tiny_batch")
    save_tiny_model("llama", path, seed=5)
    return load_model_files(path)


def assert_same_inputs(got: StepInputs, want: StepInputs) -> None:
    for name in ("input_ids", "positions", "logits_rows"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and a.tolist() == b.tolist(), name
    for name in META_TENSORS:
        a, b = getattr(got.meta, name), getattr(want.meta, name)
        assert a.dtype == b.dtype and a.tolist() == b.tolist(), name
    for name in META_VALUES:
        assert getattr(got.meta, name) == getattr(want.meta, name), name
    assert got.meta.seq_lens_cpu == want.meta.seq_lens_cpu
    assert [id(s) for s in got.sample_seqs] == [id(s) for s in want.sample_seqs]
    assert got.query_lens == want.query_lens and got.seq_lens == want.seq_lens
    assert got.pending_rows == want.pending_rows and got.pending_src == want.pending_src
    assert got.samples_every_row == want.samples_every_row


def checked_build(monkeypatch, block_size: int) -> dict[str, int]:
    """Every InputBatch.build also rebuilds the step and compares; counts steps and kinds."""
    real = InputBatch.build
    seen = {"steps": 0, "mixed": 0, "pending": 0}

    def build(self, scheduled, targets, pending=None):
        # the reference first: it reads the sequences only, the batch updates its rows
        want = build_step_inputs(scheduled, targets, block_size, torch.device("cpu"), pending)
        got = real(self, scheduled, targets, pending)
        assert_same_inputs(got, want)
        seen["steps"] += 1
        seen["mixed"] += want.meta.num_decode_tokens < len(scheduled)
        seen["pending"] += bool(want.pending_rows)
        return got

    monkeypatch.setattr(InputBatch, "build", build)
    return seen


requests = st.lists(
    st.tuples(
        st.integers(0, 12),  # arrival step
        st.integers(1, 30),  # prompt length
        st.integers(1, 24),  # max tokens
        st.sampled_from([1, 1, 2, 3]),  # n
        st.booleans(),  # aborted a few steps after arrival
    ),
    min_size=1,
    max_size=9,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    reqs=requests,
    num_kv_blocks=st.integers(14, 48),
    budget=st.sampled_from([8, 16, 24, 64]),
    max_num_seqs=st.integers(1, 8),
    async_on=st.booleans(),
    shared_prefix=st.booleans(),
)
def test_persistent_batch_equals_the_rebuilt_step(
    tiny, monkeypatch, reqs, num_kv_blocks, budget, max_num_seqs, async_on, shared_prefix
):
    block_size = 4
    with monkeypatch.context() as mp:
        seen = checked_build(mp, block_size)
        engine = make_engine(
            tiny,
            block_size=block_size,
            num_kv_blocks=num_kv_blocks,
            max_num_batched_tokens=budget,
            max_num_seqs=max_num_seqs,
            enable_chunked_prefill=True,
            enable_prefix_caching=True,
            async_scheduling="on" if async_on else "off",
        )
        g = torch.Generator().manual_seed(len(reqs))
        prefix = torch.randint(0, 256, (8,), generator=g).tolist()
        arrivals: dict[int, list] = {}
        aborts: dict[int, list[str]] = {}
        for i, (at, plen, max_tokens, n, aborted) in enumerate(reqs):
            body = torch.randint(0, 256, (plen,), generator=g).tolist()
            prompt = (prefix + body)[: max(plen, 1)] if shared_prefix else body
            params = SamplingParams(
                max_tokens=max_tokens, temperature=0.8, seed=i, n=n, ignore_eos=True
            )
            arrivals.setdefault(at, []).append((f"r{i}", prompt, params))
            if aborted:
                aborts.setdefault(at + 3, []).append(f"r{i}")
        step, added = 0, 0
        while arrivals or engine.has_unfinished_requests():
            for rid, prompt, params in arrivals.pop(step, []):
                # a pool too small for a whole prompt and its tokens can never run it
                if -(-(len(prompt) + params.max_tokens) // block_size) * params.n < num_kv_blocks:
                    engine.add_request(rid, prompt, params)
                    added += 1
            for rid in aborts.pop(step, []):
                engine.abort(rid)
            engine.step()
            step += 1
            assert step < 2_000, "engine did not finish"
        engine.set_async_scheduling(False)
    assert seen["steps"] > 0 or added == 0


def test_the_workloads_reach_preemption_forks_chunks_and_pending_rows(tiny, monkeypatch):
    """One fixed workload that shows the property test's ground is covered: preemptions,
    mixed steps, rows taken from the device, and rows that move between sequences."""
    seen = checked_build(monkeypatch, 4)
    engine = make_engine(
        tiny, num_kv_blocks=30, max_num_batched_tokens=16, max_num_seqs=6, async_scheduling="on"
    )
    g = torch.Generator().manual_seed(1)
    for r in range(8):
        params = SamplingParams(
            max_tokens=10 + 4 * r, temperature=0.8, seed=r, n=2 if r % 3 == 0 else 1,
            ignore_eos=True,
        )  # fmt: skip
        engine.add_request(
            f"r{r}", torch.randint(0, 256, (5 + 3 * r,), generator=g).tolist(), params
        )
    while engine.has_unfinished_requests():
        engine.step()
    assert engine.scheduler.num_preemptions_total > 0
    assert seen["steps"] > 20 and seen["mixed"] > 0 and seen["pending"] > 0
