"""Per-group block allocation under random traffic: a full-attention group and a sliding-window
group (and a second sliding group of another window) behind one `KVCacheCoordinator`, driven
through the real scheduler: arrivals with shared prefixes (prefix hits), chunked prefill, decode,
forks (copy-on-write), finishes, aborts and preemption from a small pool, with window eviction.

After every step, in every group: each block's reference count equals the number of live tables
holding it (the null block aside), the free queue holds exactly the unreferenced blocks, no table
holds a block twice, a sliding table holds nothing before its window, and the KV bytes in use
equal sum over groups of (distinct blocks held x that group's bytes per block).
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from serving.attention.layer_spec import KVGroup
from serving.engine.core.kv_coordinator import KVCacheCoordinator
from serving.engine.core.request import Request, SeqStatus, Sequence
from serving.engine.core.scheduler import Scheduler, SchedulerConfig
from serving.engine.core.sliding_blocks import NULL_BLOCK, SlidingWindowBlockManager
from serving.engine.worker.kv_pool import sliding_blocks_per_seq
from serving.outputs import RequestMetrics
from serving.sampling_params import SamplingParams

BS = 4
BUDGET = 12
GROUPS = [
    KVGroup(2, 16, None, (1, 3)),
    KVGroup(4, 8, 6, (0, 2)),
    KVGroup(1, 32, 11, (4,)),
]
PREFIXES = [[1, 2, 3, 4, 5, 6, 7, 8], [9, 9, 9, 9], []]


def _seq(seq_id: int, tokens: list[int]) -> Sequence:
    req = Request(f"r{seq_id}", None, tokens, SamplingParams(), RequestMetrics(0.0), forked=True)
    s = Sequence(seq_id, req, 0, list(tokens), len(tokens))
    req.seqs.append(s)
    return s


def _live_tables(coord: KVCacheCoordinator, live: list[Sequence]) -> list[list[list[int]]]:
    return [[t.block_table for t in coord.tables(s)] for s in live]


def _check(coord: KVCacheCoordinator, live: list[Sequence]) -> None:
    tables = _live_tables(coord, live)
    expected_bytes = 0
    for g, (group, m) in enumerate(zip(GROUPS, coord.managers, strict=True)):
        held = Counter()
        for per_seq in tables:
            real = [b for b in per_seq[g] if not (group.is_sliding and b == NULL_BLOCK)]
            assert len(real) == len(set(real)), f"group {g}: a table holds a block twice"
            held.update(real)
        # forks share blocks: a block's count is the number of tables holding it
        for block in m.blocks:
            if group.is_sliding and block.block_id == NULL_BLOCK:
                assert block.ref_count == 1
                continue
            assert block.ref_count == held[block.block_id], f"group {g} block {block.block_id}"
            assert (block.ref_count == 0) == (block.block_id in m.free_queue)
        for h, bid in m.cached.items():
            assert m.blocks[bid].hash == h
        assert m.num_blocks_in_use() == len(held)
        expected_bytes += len(held) * group.bytes_per_block(BS, 2)
    in_use = sum(
        n * g.bytes_per_block(BS, 2) for n, g in zip(coord.blocks_in_use(), GROUPS, strict=True)
    )
    assert in_use == expected_bytes


def _check_windows(coord: KVCacheCoordinator, scheduled: list[Sequence]) -> None:
    """At schedule time, a sliding table holds no block wholly before its window."""
    for s in scheduled:
        for g, (m, t) in enumerate(zip(coord.managers, coord.tables(s), strict=True)):
            if not isinstance(m, SlidingWindowBlockManager):
                continue
            first = m.first_live_block(s.num_computed_tokens)
            assert all(b == NULL_BLOCK for b in t.block_table[:first]), f"group {g}"
            held = sum(b != NULL_BLOCK for b in t.block_table)
            assert held <= sliding_blocks_per_seq(GROUPS[g], BS, BUDGET)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), pool=st.integers(11, 30), prefix=st.booleans())
def test_per_group_blocks_are_never_leaked_or_double_owned(data, pool, prefix):
    # small pools: the full group runs out (preemption); the sliding ones hold a window each
    coord = KVCacheCoordinator(GROUPS, [pool, pool // 2 + 9, pool // 2 + 10], BS, prefix)
    sched = Scheduler(SchedulerConfig(6, BUDGET, True), coord)
    live: list[Sequence] = []
    budget_left: dict[Sequence, int] = {}
    next_id = 0
    for _ in range(data.draw(st.integers(5, 60), label="steps")):
        action = data.draw(st.sampled_from(["arrive", "arrive", "step", "step", "finish", "fork"]))
        if action == "arrive":
            head = data.draw(st.sampled_from(PREFIXES))
            tail = data.draw(st.lists(st.integers(10, 40), min_size=1, max_size=30))
            s = _seq(next_id, head + tail)
            next_id += 1
            sched.add(s)
            live.append(s)
            budget_left[s] = data.draw(st.integers(1, 24))
        elif action == "finish" and live:
            victim = data.draw(st.sampled_from(live))
            sched.finish(victim)
            live.remove(victim)
        elif action == "fork":
            # just sampled: the engine forks a request's n samples at this point
            ready = [s for s in sched.running if s.num_computed_tokens == s.num_tokens - 1]
            if ready:
                parent = data.draw(st.sampled_from(ready))
                child = _seq(next_id, list(parent.token_ids))
                next_id += 1
                child.num_prompt_tokens = parent.num_prompt_tokens
                sched.fork(parent, child)
                live.append(child)
                budget_left[child] = budget_left.get(parent, 1)
        else:
            out = sched.schedule()
            _check_windows(coord, [item.seq for item in out.scheduled])
            completing = [item.seq for item in out.scheduled if item.completes]
            sched.update_after_step(out)
            for s in completing:
                s.append_token(data.draw(st.integers(10, 40)))
                budget_left[s] -= 1
                if budget_left[s] <= 0:
                    sched.finish(s)
                    live.remove(s)
        _check(coord, live)
    for s in list(live):
        sched.finish(s)
    _check(coord, [])
    for m in coord.managers:
        assert m.num_blocks_in_use() == 0
    assert all(s.status is SeqStatus.FINISHED for s in budget_left)
