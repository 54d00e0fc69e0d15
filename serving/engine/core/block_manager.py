"""The block manager: the only code that touches KV block ids.

Fixed-size blocks; per-sequence block tables; reference counts (the n samples of a request share
their prompt blocks and copy a shared partial block on first write: copy-on-write); a prefix cache
keyed by a hash chain over FULL blocks (hash(parent hash, token ids)), whose blocks stay cached
after their last user frees them and are evicted least-recently-freed first.

Free-queue order is the eviction order: a freed block that holds no cached prefix goes to the
head (reused first); a freed cached block goes to the tail. A sequence's blocks are freed last
block first, so the tail of a prefix chain is evicted before its head.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from serving.engine.core.request import Sequence


@dataclass
class Block:
    block_id: int
    ref_count: int = 0
    hash: int | None = None  # set while the block is registered in the prefix cache
    parent_hash: int | None = None
    token_ids: tuple[int, ...] | None = None  # checked on lookup, so a hash collision can't alias


_NO_COPIES: list[tuple[int, int]] = []  # shared, never mutated (callers only extend from it)


def hash_block(parent_hash: int | None, token_ids: tuple[int, ...]) -> int:
    return hash((parent_hash, token_ids))


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True):
        if num_blocks < 1 or block_size < 1:
            raise ValueError(
                f"need at least one block of at least one token, got {num_blocks} x {block_size}"
            )
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free_queue: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))
        self.cached: dict[int, int] = {}  # hash -> block id
        # bumped whenever a lookup's answer could change (a block registered or evicted), so a
        # caller may keep a lookup while this stays the same (the scheduler's waiting head)
        self.cache_version = 0
        self.prefix_queries = 0  # prompt tokens looked up
        self.prefix_hits = 0  # of which found in the cache

    # ---- queries -------------------------------------------------------------------------
    @property
    def num_free_blocks(self) -> int:
        return len(self.free_queue)

    @property
    def usage(self) -> float:
        return 1.0 - len(self.free_queue) / self.num_blocks

    def num_blocks_in_use(self) -> int:
        return self.num_blocks - len(self.free_queue)

    def blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def lookup(self, seq: Sequence) -> tuple[list[int], list[int]]:
        """Cached block ids (and their hashes) for the sequence's leading full blocks. At most
        `num_tokens - 1` tokens are served from the cache: the last one must run to give logits.
        A request asking for prompt logprobs gets no hits: every prompt position must run."""
        if not self.enable_prefix_caching or seq.request.params.prompt_logprobs is not None:
            return [], []
        ids: list[int] = []
        hashes: list[int] = []
        parent: int | None = None
        bs = self.block_size
        for b in range((seq.num_tokens - 1) // bs):
            tokens = tuple(seq.token_ids[b * bs : (b + 1) * bs])
            h = hash_block(parent, tokens)
            bid = self.cached.get(h)
            if bid is None:
                break
            block = self.blocks[bid]
            if block.token_ids != tokens or block.parent_hash != parent:
                break
            ids.append(bid)
            hashes.append(h)
            parent = h
        return ids, hashes

    def num_cached_tokens(self, seq: Sequence) -> int:
        return len(self.lookup(seq)[0]) * self.block_size

    # ---- admission: can_allocate / allocate ------------------------------------------------
    def can_allocate(
        self, seq: Sequence, num_new_tokens: int, hits: list[int] | None = None
    ) -> bool:
        """Room for the prefix-cache hits plus `num_new_tokens` tokens after them? `hits`: the
        block ids of a `lookup(seq)` still valid (same `cache_version`), to skip doing it again."""
        if hits is None:
            hits, _ = self.lookup(seq)
        needed = self.blocks_for(len(hits) * self.block_size + num_new_tokens) - len(hits)
        reclaimed = sum(
            1 for bid in hits if self.blocks[bid].ref_count == 0
        )  # leave the free queue
        return needed + reclaimed <= len(self.free_queue)

    def allocate(
        self, seq: Sequence, num_new_tokens: int, hit: tuple[list[int], list[int]] | None = None
    ) -> int:
        """Give a new (or resumed) sequence its cached prefix blocks and blocks for
        `num_new_tokens` more; sets `num_computed_tokens` to the cached length and returns it.
        `hit`: a `lookup(seq)` still valid (same `cache_version`), to skip doing it again."""
        assert not seq.block_table, "allocate() is for sequences without blocks"
        hits, hashes = hit if hit is not None else self.lookup(seq)
        for bid in hits:
            self._acquire(bid)
        seq.block_table = list(hits)
        seq.block_table_synced = 0
        seq.block_hashes = list(hashes)
        seq.num_hashed_blocks = len(hits)
        seq.num_computed_tokens = len(hits) * self.block_size
        self._grow(seq, seq.num_computed_tokens + num_new_tokens)
        self.prefix_queries += seq.num_tokens
        self.prefix_hits += seq.num_computed_tokens
        return seq.num_computed_tokens

    # ---- running: can_append / append_slot -------------------------------------------------
    def _needs_cow(self, seq: Sequence) -> bool:
        pos = seq.num_computed_tokens
        if pos % self.block_size == 0 or pos // self.block_size >= len(seq.block_table):
            return False
        return self.blocks[seq.block_table[pos // self.block_size]].ref_count > 1

    def can_append(self, seq: Sequence, num_new_tokens: int = 1) -> bool:
        total = seq.num_computed_tokens + num_new_tokens
        needed = max(0, self.blocks_for(total) - len(seq.block_table)) + int(self._needs_cow(seq))
        return needed <= len(self.free_queue)

    def append_slot(self, seq: Sequence, num_new_tokens: int = 1) -> list[tuple[int, int]]:
        """Make the table cover `num_new_tokens` more tokens. A shared partial block about to be
        written is copied first; returns the (src, dst) block copies the runner must do."""
        copies: list[tuple[int, int]] = []
        if self._needs_cow(seq):
            idx = seq.num_computed_tokens // self.block_size
            old = seq.block_table[idx]
            new = self._take_free()
            self.blocks[old].ref_count -= 1  # still >= 1: another sequence holds it
            seq.block_table[idx] = new
            seq.block_table_synced = min(seq.block_table_synced, idx)
            copies.append((old, new))
        self._grow(seq, seq.num_computed_tokens + num_new_tokens)
        return copies

    def try_append(self, seq: Sequence, num_new_tokens: int) -> list[tuple[int, int]] | None:
        """`can_append` then `append_slot` in one pass (the scheduler's per-sequence decode
        path): the block copies to do, or None when the pool can't hold the new tokens."""
        cow = self._needs_cow(seq)
        missing = self.blocks_for(seq.num_computed_tokens + num_new_tokens) - len(seq.block_table)
        if max(0, missing) + cow > len(self.free_queue):
            return None
        if not cow and missing <= 0:
            return _NO_COPIES
        return self.append_slot(seq, num_new_tokens)

    # ---- sharing, caching, freeing ---------------------------------------------------------
    def fork(self, parent: Sequence, child: Sequence) -> None:
        """The child shares every block of the parent (n > 1 samples of one prompt)."""
        for bid in parent.block_table:
            self.blocks[bid].ref_count += 1
        child.block_table = list(parent.block_table)
        child.block_table_synced = 0
        child.block_hashes = list(parent.block_hashes)
        child.num_hashed_blocks = parent.num_hashed_blocks

    def cache_blocks(self, seq: Sequence) -> None:
        """Register the sequence's newly computed full blocks in the prefix cache."""
        if not self.enable_prefix_caching:
            return
        bs = self.block_size
        parent = seq.block_hashes[-1] if seq.block_hashes else None
        for b in range(seq.num_hashed_blocks, seq.num_computed_tokens // bs):
            tokens = tuple(seq.token_ids[b * bs : (b + 1) * bs])
            h = hash_block(parent, tokens)
            block = self.blocks[seq.block_table[b]]
            if h not in self.cached and block.hash is None:
                self.cached[h] = block.block_id
                block.hash, block.parent_hash, block.token_ids = h, parent, tokens
                self.cache_version += 1
            # else: the same content is cached in another block already; this one stays private
            seq.block_hashes.append(h)
            seq.num_hashed_blocks += 1
            parent = h

    def free(self, seq: Sequence) -> None:
        for bid in reversed(seq.block_table):
            block = self.blocks[bid]
            block.ref_count -= 1
            assert block.ref_count >= 0, f"block {bid} freed twice"
            if block.ref_count == 0:
                self.free_queue[bid] = None
                if block.hash is None:
                    self.free_queue.move_to_end(bid, last=False)
        seq.block_table = []
        seq.block_table_synced = 0
        seq.block_hashes = []
        seq.num_hashed_blocks = 0

    # ---- internals -------------------------------------------------------------------------
    def _acquire(self, bid: int) -> None:
        block = self.blocks[bid]
        if block.ref_count == 0:
            del self.free_queue[bid]  # a cache hit on a free block: it is in use again
        block.ref_count += 1

    def _take_free(self) -> int:
        if not self.free_queue:
            raise RuntimeError("out of KV blocks (the scheduler should have checked first)")
        bid, _ = self.free_queue.popitem(last=False)
        block = self.blocks[bid]
        if block.hash is not None:  # evict its cached prefix
            if self.cached.get(block.hash) == bid:
                del self.cached[block.hash]
            block.hash = block.parent_hash = block.token_ids = None
            self.cache_version += 1
        block.ref_count = 1
        return bid

    def _grow(self, seq: Sequence, num_tokens: int) -> None:
        while len(seq.block_table) < self.blocks_for(num_tokens):
            seq.block_table.append(self._take_free())
