"""The block manager of a sliding-window KV group: blocks that fall out of the window are freed.

A query at position q reads keys q - window < k <= q (serving/attention/layer_spec.py). Once a
sequence has `c` computed tokens every later query sits at c or after, so the leading
`(c - window + 1) // block_size` blocks are never read again: they are freed (kept in the prefix
cache, when registered, until evicted) and their table entries point at the group's null block,
id 0, which is never handed out, never written and never read. A long context therefore holds
about one window of blocks per sequence in this group.

A prefix-cache hit is served like the full-attention groups' (every leading block cached), and
the hit's blocks that are already out of the window are not taken at all.
"""

from __future__ import annotations

from serving.engine.core.block_manager import BlockManager, hash_block
from serving.engine.core.request import Sequence

NULL_BLOCK = 0


class SlidingWindowBlockManager(BlockManager):
    def __init__(
        self, num_blocks: int, block_size: int, window: int, enable_prefix_caching: bool = True
    ):
        if num_blocks < 2:
            raise ValueError(
                f"a sliding-window pool needs the null block and one more, got {num_blocks}"
            )
        super().__init__(num_blocks, block_size, enable_prefix_caching)
        self.window = window
        del self.free_queue[NULL_BLOCK]
        self.blocks[NULL_BLOCK].ref_count = 1  # held for good: never freed, never evicted

    @property
    def usage(self) -> float:
        return 1.0 - len(self.free_queue) / (self.num_blocks - 1)

    def num_blocks_in_use(self) -> int:
        return self.num_blocks - 1 - len(self.free_queue)

    def first_live_block(self, num_computed_tokens: int) -> int:
        """Blocks before this index are out of the window of every query still to run."""
        return max(0, (num_computed_tokens - self.window + 1) // self.block_size)

    # ---- admission -----------------------------------------------------------------------
    def can_allocate(
        self, seq: Sequence, num_new_tokens: int, hits: list[int] | None = None
    ) -> bool:
        if hits is None:
            hits, _ = self.lookup(seq)
        live = hits[self.first_live_block(len(hits) * self.block_size) :]
        needed = self.blocks_for(len(hits) * self.block_size + num_new_tokens) - len(hits)
        reclaimed = sum(1 for bid in live if self.blocks[bid].ref_count == 0)
        return needed + reclaimed <= len(self.free_queue)

    def allocate(
        self, seq: Sequence, num_new_tokens: int, hit: tuple[list[int], list[int]] | None = None
    ) -> int:
        hits, hashes = hit if hit is not None else self.lookup(seq)
        first = self.first_live_block(len(hits) * self.block_size)
        # out-of-window hits are not taken: the table points at the null block there
        masked = [NULL_BLOCK] * first + list(hits[first:])
        computed = super().allocate(seq, num_new_tokens, (masked, hashes))
        return computed

    def _acquire(self, bid: int) -> None:
        if bid != NULL_BLOCK:
            super()._acquire(bid)

    # ---- running ---------------------------------------------------------------------------
    def evict_out_of_window(self, seq: Sequence) -> None:
        table = seq.block_table
        first = min(self.first_live_block(seq.num_computed_tokens), len(table))
        for idx in range(first - 1, -1, -1):  # newest first: the chain's tail leaves last
            bid = table[idx]
            if bid == NULL_BLOCK:
                break  # everything before was evicted already
            self._release(bid)
            table[idx] = NULL_BLOCK
            seq.block_table_synced = min(seq.block_table_synced, idx)

    def append_slot(self, seq: Sequence, num_new_tokens: int = 1) -> list[tuple[int, int]]:
        self.evict_out_of_window(seq)
        return super().append_slot(seq, num_new_tokens)

    def try_append(self, seq: Sequence, num_new_tokens: int) -> list[tuple[int, int]] | None:
        self.evict_out_of_window(seq)
        return super().try_append(seq, num_new_tokens)

    def can_append(self, seq: Sequence, num_new_tokens: int = 1) -> bool:
        first = min(self.first_live_block(seq.num_computed_tokens), len(seq.block_table))
        freed = sum(
            1
            for bid in seq.block_table[:first]
            if bid != NULL_BLOCK and self.blocks[bid].ref_count == 1
        )
        total = seq.num_computed_tokens + num_new_tokens
        needed = max(0, self.blocks_for(total) - len(seq.block_table)) + int(self._needs_cow(seq))
        return needed <= len(self.free_queue) + freed

    # ---- sharing, caching, freeing ---------------------------------------------------------
    def fork(self, parent: Sequence, child: Sequence) -> None:
        super().fork(parent, child)
        for bid in parent.block_table:
            if bid == NULL_BLOCK:
                self.blocks[bid].ref_count -= 1  # the null block's count stays fixed

    def cache_blocks(self, seq: Sequence) -> None:
        if not self.enable_prefix_caching:
            return
        bs = self.block_size
        parent = seq.block_hashes[-1] if seq.block_hashes else None
        for b in range(seq.num_hashed_blocks, seq.num_computed_tokens // bs):
            tokens = tuple(seq.token_ids[b * bs : (b + 1) * bs])
            h = hash_block(parent, tokens)
            bid = seq.block_table[b]
            block = self.blocks[bid]
            if bid != NULL_BLOCK and h not in self.cached and block.hash is None:
                self.cached[h] = bid
                block.hash, block.parent_hash, block.token_ids = h, parent, tokens
                self.cache_version += 1
            seq.block_hashes.append(h)
            seq.num_hashed_blocks += 1
            parent = h

    def free(self, seq: Sequence) -> None:
        for bid in reversed(seq.block_table):
            if bid != NULL_BLOCK:
                self._release(bid)
        seq.block_table = []
        seq.block_table_synced = 0
        seq.block_hashes = []
        seq.num_hashed_blocks = 0

    def _release(self, bid: int) -> None:
        block = self.blocks[bid]
        block.ref_count -= 1
        assert block.ref_count >= 0, f"block {bid} freed twice"
        if block.ref_count == 0:
            self.free_queue[bid] = None
            if block.hash is None:
                self.free_queue.move_to_end(bid, last=False)
