"""Scheduler: the catch-up rule under a token budget (chunked prefill mixed with decode), prefix
hits counting as computed, max_num_seqs admission, preemption newest-first, abort freeing blocks."""

from __future__ import annotations

from serving.engine.core.block_manager import BlockManager
from serving.engine.core.request import Request, SeqStatus, Sequence
from serving.engine.core.scheduler import Scheduler, SchedulerConfig
from serving.outputs import RequestMetrics
from serving.sampling_params import SamplingParams

BS = 4


def make(num_blocks=32, budget=10, max_seqs=8, chunked=True) -> Scheduler:
    return Scheduler(SchedulerConfig(max_seqs, budget, chunked), BlockManager(num_blocks, BS))


def seq(n_tokens: int, seq_id: int, first: int = 0) -> Sequence:
    tokens = list(range(first, first + n_tokens))
    req = Request(f"r{seq_id}", None, tokens, SamplingParams(), RequestMetrics(0.0), forked=True)
    s = Sequence(seq_id, req, 0, list(tokens), n_tokens)
    req.seqs.append(s)
    return s


def run_step(sched: Scheduler) -> list[tuple[int, int]]:
    """Schedule, 'run', and append a sampled token to every sequence that caught up."""
    out = sched.schedule()
    plan = [(item.seq.seq_id, item.num_new_tokens) for item in out.scheduled]
    completing = [item.seq for item in out.scheduled if item.completes]
    sched.update_after_step(out)
    for s in completing:
        s.append_token(7)
    return plan


def test_chunked_prefill_mixes_with_decode_within_budget():
    sched = make(budget=10)
    a, b = seq(25, 0), seq(5, 1, first=100)
    sched.add(a)
    sched.add(b)
    assert run_step(sched) == [(0, 10)]  # budget spent on a's first chunk
    assert run_step(sched) == [(0, 10)]
    assert run_step(sched) == [(0, 5), (1, 5)]  # a's last chunk, then b's whole prompt
    assert a.num_output_tokens == 1 and b.num_output_tokens == 1
    assert run_step(sched) == [(0, 1), (1, 1)]  # both decode
    c = seq(30, 2, first=200)
    sched.add(c)
    assert run_step(sched) == [(0, 1), (1, 1), (2, 8)]  # decodes first, c gets what is left


def test_chunked_prefill_off_waits_for_a_whole_prompt():
    sched = make(budget=10, chunked=False)
    a, b = seq(6, 0), seq(6, 1, first=50)
    sched.add(a)
    sched.add(b)
    assert run_step(sched) == [(0, 6)]  # b (6) does not fit the 4 left
    assert run_step(sched) == [(0, 1), (1, 6)]


def test_prefix_hit_counts_as_computed():
    sched = make(budget=64)
    a = seq(13, 0)
    sched.add(a)
    run_step(sched)
    b = seq(13, 1)  # same 13 prompt tokens: 3 full blocks cached
    sched.add(b)
    assert run_step(sched) == [(0, 1), (1, 1)]  # b only runs its last token
    assert b.request.metrics.num_cached_prompt_tokens == 12


def test_max_num_seqs_admission():
    sched = make(budget=64, max_seqs=2)
    seqs = [seq(3, i, first=10 * i) for i in range(3)]
    for s in seqs:
        sched.add(s)
    assert run_step(sched) == [(0, 3), (1, 3)]
    assert list(sched.waiting) == [seqs[2]]
    sched.finish(seqs[0])
    assert run_step(sched) == [(1, 1), (2, 3)]


def test_preemption_newest_first_then_resume_and_finish():
    sched = make(num_blocks=4, budget=64)
    a, b = seq(7, 0), seq(7, 1, first=50)
    sched.add(a)
    sched.add(b)
    assert run_step(sched) == [(0, 7), (1, 7)]  # 2 blocks each: pool full
    # both now hold 8 tokens and need a third block at position 8 ... after one more decode
    assert run_step(sched) == [(0, 1), (1, 1)]
    out = sched.schedule()  # a needs a block: b (newest) is preempted, a continues
    assert [s.seq_id for s in out.preempted] == [1]
    assert [(i.seq.seq_id, i.num_new_tokens) for i in out.scheduled] == [(0, 1)]
    assert b.status is SeqStatus.WAITING and b.block_table == [] and b.num_computed_tokens == 0
    assert list(sched.waiting) == [b] and b.request.metrics.num_preemptions == 1
    sched.update_after_step(out)
    a.append_token(7)
    sched.finish(a)  # a done: its blocks return; b resumes with its prompt + 2 output tokens
    # b's first block is still in the prefix cache; its second was evicted when a took a block
    assert run_step(sched) == [(1, 5)]
    assert b.num_output_tokens == 3 and sched.num_preemptions_total == 1


def test_a_sequence_that_cannot_fit_preempts_itself_when_newest():
    sched = make(num_blocks=3, budget=64)
    a, b = seq(8, 0), seq(4, 1, first=50)
    sched.add(a)
    sched.add(b)
    run_step(sched)  # a: 2 blocks, b: 1 block, pool empty; both append a token
    out = sched.schedule()  # a needs block 3 -> preempt b; then b is gone, a fits
    assert [s.seq_id for s in out.preempted] == [1]
    assert [i.seq.seq_id for i in out.scheduled] == [0]


def test_abort_frees_blocks_at_once():
    sched = make(num_blocks=8, budget=64)
    a = seq(10, 0)
    sched.add(a)
    run_step(sched)
    assert sched.bm.num_free_blocks == 5
    sched.finish(a)
    assert sched.bm.num_free_blocks == 8 and not sched.has_work() and a.status is SeqStatus.FINISHED
    w = seq(5, 1)
    sched.add(w)
    sched.finish(w)  # aborting a waiting sequence just drops it
    assert not sched.waiting
