"""Block manager: exact block ids, reference counts, prefix-cache hits, eviction order, CoW."""

from __future__ import annotations

from serving.engine.core.block_manager import BlockManager
from serving.engine.core.request import Request, Sequence
from serving.outputs import RequestMetrics
from serving.sampling_params import SamplingParams

BS = 4


def seq(tokens: list[int], seq_id: int = 0) -> Sequence:
    req = Request(f"r{seq_id}", None, list(tokens), SamplingParams(), RequestMetrics(0.0))
    return Sequence(seq_id, req, 0, list(tokens), len(tokens))


def computed(bm: BlockManager, s: Sequence, n: int | None = None) -> None:
    """Pretend the runner computed the sequence up to `n` tokens (default: all)."""
    s.num_computed_tokens = s.num_tokens if n is None else n
    bm.cache_blocks(s)


def refs(bm: BlockManager, ids) -> list[int]:
    return [bm.blocks[i].ref_count for i in ids]


def test_allocate_takes_lowest_free_blocks_and_free_returns_them():
    bm = BlockManager(8, BS)
    a = seq(list(range(10)))
    assert bm.can_allocate(a, 10)
    assert bm.allocate(a, 10) == 0
    assert a.block_table == [0, 1, 2] and refs(bm, [0, 1, 2]) == [1, 1, 1]
    assert bm.num_free_blocks == 5
    bm.free(a)
    assert a.block_table == [] and bm.num_free_blocks == 8 and refs(bm, range(8)) == [0] * 8


def test_can_allocate_refuses_when_pool_is_short():
    bm = BlockManager(3, BS)
    assert bm.can_allocate(seq(list(range(12))), 12)
    assert not bm.can_allocate(seq(list(range(13))), 13)


def test_prefix_hit_shares_full_blocks_and_counts_tokens():
    bm = BlockManager(8, BS)
    a = seq(list(range(10)))
    bm.allocate(a, 10)
    computed(bm, a)  # blocks 0 and 1 are full -> cached; block 2 (2 tokens) is not
    assert (
        bm.blocks[0].hash is not None
        and bm.blocks[1].hash is not None
        and bm.blocks[2].hash is None
    )
    b = seq(list(range(8)) + [99, 98, 97], seq_id=1)
    assert bm.num_cached_tokens(b) == 8
    assert bm.allocate(b, 3) == 8
    assert b.block_table == [0, 1, 3] and b.num_computed_tokens == 8
    assert refs(bm, [0, 1, 2, 3]) == [2, 2, 1, 1]
    assert (bm.prefix_queries, bm.prefix_hits) == (10 + 11, 8)


def test_prefix_hit_leaves_last_token_to_compute():
    bm = BlockManager(8, BS)
    a = seq(list(range(8)))
    bm.allocate(a, 8)
    computed(bm, a)
    # the same 8 tokens again: only the first block may come from the cache (logits need a token)
    assert bm.num_cached_tokens(seq(list(range(8)), 1)) == 4
    assert bm.num_cached_tokens(seq(list(range(9)), 2)) == 8


def test_hash_chain_depends_on_the_whole_prefix():
    bm = BlockManager(8, BS)
    a = seq([1, 2, 3, 4, 5, 6, 7, 8, 9])
    bm.allocate(a, 9)
    computed(bm, a)
    # same second block, different first block: no hit at all (the chain includes the parent)
    assert bm.num_cached_tokens(seq([0, 2, 3, 4, 5, 6, 7, 8, 9], 1)) == 0


def test_eviction_order_uncached_first_then_least_recently_freed_chain_tail_first():
    bm = BlockManager(8, BS)
    a = seq(list(range(10)))
    bm.allocate(a, 10)  # [0, 1, 2]
    computed(bm, a)
    b = seq(list(range(8)) + [50, 51, 52], 1)
    bm.allocate(b, 3)  # [0, 1, 3]
    computed(bm, b)
    bm.free(a)  # 2 is uncached -> head; 0, 1 still used by b
    bm.free(b)  # 3 uncached -> head; then 1, 0 (chain tail first) -> tail
    assert list(bm.free_queue) == [3, 2, 4, 5, 6, 7, 1, 0]
    # a cache hit on a free block takes it out of the free queue
    c = seq(list(range(4)) + [70, 71], 2)
    assert bm.allocate(c, 2) == 4 and c.block_table == [0, 3]
    assert list(bm.free_queue) == [2, 4, 5, 6, 7, 1]
    bm.free(c)
    # an unrelated sequence takes 6 blocks: the uncached ones first, then the free queue order
    d = seq([200 + i for i in range(24)], 3)
    bm.allocate(d, 24)
    assert d.block_table == [3, 2, 4, 5, 6, 7] and list(bm.free_queue) == [1, 0]
    computed(bm, d)
    bm.free(d)  # all six cached now: they join the tail, chain tail first
    assert list(bm.free_queue) == [1, 0, 7, 6, 5, 4, 2, 3]
    e = seq([200 + i for i in range(24)], 4)
    assert bm.allocate(e, 4) == 20  # 5 blocks hit; the last is recomputed in a fresh block
    assert e.block_table == [3, 2, 4, 5, 6, 1]  # block 1 was least recently freed: evicted
    assert bm.num_cached_tokens(seq(list(range(10)), 5)) == 4  # a's chain now stops at block 0
    assert list(bm.free_queue) == [0, 7]


def test_lru_between_chains():
    bm = BlockManager(4, BS)
    a, b = seq([1] * 5), seq([2] * 5, 1)
    for s in (a, b):
        bm.allocate(s, 5)
        computed(bm, s)
    assert a.block_table == [0, 1] and b.block_table == [2, 3]
    bm.free(a)  # freed first -> evicted first
    bm.free(b)
    x = seq([9] * 8, 2)
    bm.allocate(x, 8)  # two blocks: the uncached 1 and 3, no cached prefix touched
    assert x.block_table == [3, 1]
    y = seq([8] * 4, 3)
    bm.allocate(y, 4)
    assert y.block_table == [0]  # a's cached block went before b's
    assert bm.num_cached_tokens(seq([1] * 5, 4)) == 0 and bm.num_cached_tokens(seq([2] * 5, 5)) == 4


def test_fork_and_copy_on_write_of_the_shared_partial_block():
    bm = BlockManager(8, BS)
    parent = seq(list(range(6)))
    bm.allocate(parent, 6)
    computed(bm, parent)
    child = seq(list(range(6)), 1)
    bm.fork(parent, child)
    child.num_computed_tokens = 6
    assert child.block_table == [0, 1] and refs(bm, [0, 1]) == [2, 2]
    for s, tok in ((parent, 100), (child, 200)):
        s.token_ids.append(tok)
    assert bm.can_append(parent, 1)
    copies = bm.append_slot(parent, 1)  # block 1 is shared and half full: copy it before writing
    assert copies == [(1, 2)] and parent.block_table == [0, 2]
    assert refs(bm, [0, 1, 2]) == [2, 1, 1]
    assert bm.append_slot(child, 1) == [] and child.block_table == [0, 1]  # sole owner now
    # full shared blocks are never copied: crossing into a new block just allocates
    for s in (parent, child):
        computed(bm, s, 8)
        s.token_ids.append(7)
    assert bm.append_slot(parent, 1) == [] and parent.block_table == [0, 2, 3]
    bm.free(parent)
    bm.free(child)
    assert refs(bm, range(8)) == [0] * 8 and bm.num_free_blocks == 8


def test_can_append_counts_the_cow_block():
    bm = BlockManager(2, BS)
    parent = seq(list(range(6)))
    bm.allocate(parent, 6)
    computed(bm, parent)
    child = seq(list(range(6)), 1)
    bm.fork(parent, child)
    parent.token_ids.append(1)
    assert bm.num_free_blocks == 0 and not bm.can_append(parent, 1)
