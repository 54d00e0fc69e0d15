"""The waiting head's prefix-cache lookup: done once per admission, kept while the block
manager's cache is unchanged, redone when it changes; schedules identical to looking up every
time (a reference scheduler that never keeps a lookup, on seeded random workloads)."""

from __future__ import annotations

import random

import pytest
from test_scheduler import BS, make, run_step, seq

from serving.engine.core.block_manager import BlockManager
from serving.engine.core.request import Request, Sequence
from serving.engine.core.scheduler import HeadLookup, Scheduler, SchedulerConfig
from serving.outputs import RequestMetrics
from serving.sampling_params import SamplingParams


def count_lookups(sched: Scheduler) -> dict[str, int]:
    calls = {"n": 0}
    real = sched.bm.lookup

    def spy(s):
        calls["n"] += 1
        return real(s)

    sched.bm.lookup = spy
    return calls


def test_admission_looks_up_the_prefix_once():
    sched = make(budget=64)
    calls = count_lookups(sched)
    sched.add(seq(13, 0))
    run_step(sched)
    assert calls["n"] == 1
    b = seq(13, 1)  # the same prompt: a hit, still one lookup
    sched.add(b)
    run_step(sched)
    assert calls["n"] == 2 and b.request.metrics.num_cached_prompt_tokens == 12


def test_a_blocked_head_is_not_looked_up_again_while_the_cache_is_unchanged():
    sched = Scheduler(
        SchedulerConfig(8, 64, True), BlockManager(4, BS, enable_prefix_caching=False)
    )
    calls = count_lookups(sched)
    sched.add(seq(13, 0))  # 4 blocks: the whole pool
    run_step(sched)
    sched.add(seq(5, 1, first=50))  # needs 2 blocks: waits
    for _ in range(3):
        assert run_step(sched) == [(0, 1)]
    assert calls["n"] == 2  # one for each admission attempt, none per blocked step


def tokens_seq(tokens: list[int], seq_id: int) -> Sequence:
    req = Request(f"r{seq_id}", None, tokens, SamplingParams(), RequestMetrics(0.0), forked=True)
    s = Sequence(seq_id, req, 0, list(tokens), len(tokens))
    req.seqs.append(s)
    return s


def test_a_kept_lookup_is_redone_when_its_hit_is_evicted():
    """b waits with a's two cached blocks as hits; c's decode takes one of them from the free
    queue. Reusing the kept lookup would hand b a block now holding c's KV."""
    sched = make(num_blocks=5, budget=64)
    calls = count_lookups(sched)
    a = tokens_seq(list(range(9)), 0)
    sched.add(a)
    run_step(sched)
    sched.finish(a)  # blocks 0 and 1 stay cached (a's tokens 0..7); free order 2, 3, 4, 1, 0
    c = tokens_seq(list(range(90, 102)), 1)
    sched.add(c)
    run_step(sched)  # c: blocks 2, 3, 4 (12 tokens, then one sampled)
    b = tokens_seq(list(range(8)) + list(range(50, 59)), 2)
    sched.add(b)
    out = sched.schedule()  # c decodes into block 1 (evicting a's second block); b waits
    assert c.block_table == [2, 3, 4, 1] and list(sched.waiting) == [b]
    sched.update_after_step(out)
    c.append_token(7)
    assert sched._head.hits == [0]  # looked up again after the eviction
    before = calls["n"]
    sched.finish(c)
    assert run_step(sched) == [(2, 13)]  # 4 tokens from the cache, 13 to run
    assert calls["n"] == before  # freeing changed no cached content: the kept lookup held
    assert b.request.metrics.num_cached_prompt_tokens == 4 and b.block_table[0] == 0
    assert all(sched.bm.blocks[bid].ref_count == 1 for bid in b.block_table)


class LookupEveryTime(Scheduler):
    """The reference: the lookup done afresh at every admission attempt."""

    def _lookup(self, s: Sequence) -> HeadLookup:
        hits, hashes = self.bm.lookup(s)
        return HeadLookup(s, s.num_tokens, self.bm.cache_version, hits, hashes)


def _workload(rng: random.Random) -> list[tuple[int, list[int], int]]:
    """(arrival step, prompt, output length): prompts share prefixes, so the cache matters."""
    stems = [[rng.randrange(50) for _ in range(rng.randrange(4, 14))] for _ in range(3)]
    out = []
    for _ in range(rng.randrange(6, 14)):
        prompt = rng.choice(stems) + [rng.randrange(50) for _ in range(rng.randrange(1, 9))]
        out.append((rng.randrange(12), prompt, rng.randrange(1, 8)))
    return out


def _simulate(cls: type[Scheduler], work, num_blocks: int, budget: int, chunked: bool):
    sched = cls(SchedulerConfig(4, budget, chunked), BlockManager(num_blocks, BS))
    trace, seqs, step = [], [], 0
    while step < 400 and (sched.has_work() or any(w[0] >= step for w in work)):
        for i, (arrival, prompt, _) in enumerate(work):
            if arrival == step:
                req = Request(
                    f"r{i}", None, prompt, SamplingParams(), RequestMetrics(0.0), forked=True
                )
                s = Sequence(i, req, 0, list(prompt), len(prompt))
                req.seqs.append(s)
                seqs.append(s)
                sched.add(s)
        out = sched.schedule()
        trace.append(
            [(it.seq.seq_id, it.num_new_tokens, tuple(it.seq.block_table)) for it in out.scheduled]
        )
        completing = [it.seq for it in out.scheduled if it.completes]
        sched.update_after_step(out)
        for s in completing:
            s.append_token(7 + step % 5)
            if s.num_output_tokens >= work[s.seq_id][2]:
                sched.finish(s)
        step += 1
    seqs.sort(key=lambda s: s.seq_id)
    return trace, [(s.request.metrics.num_cached_prompt_tokens, s.num_output_tokens) for s in seqs]


@pytest.mark.parametrize("seed", range(12))
def test_schedules_match_a_scheduler_that_always_looks_up(seed):
    rng = random.Random(seed)
    work = _workload(rng)
    chunked = seed % 3 != 0
    longest = max(len(p) + n for _, p, n in work)
    budget = rng.choice([8, 16, 64]) if chunked else longest + 1
    num_blocks = rng.randrange(-(-longest // BS) + 1, 16)
    kept = _simulate(Scheduler, work, num_blocks, budget, chunked)
    reference = _simulate(LookupEveryTime, work, num_blocks, budget, chunked)
    assert kept == reference
    assert all(done == n for (_, done), (_, _, n) in zip(kept[1], work, strict=True))
