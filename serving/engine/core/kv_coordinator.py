"""Block managers for a model whose layers form several KV-cache groups (per-layer geometry).

Each group (serving/attention/layer_spec.py: layers of one KV-head count, head_dim and window)
has its own pool of blocks sized for its geometry, its own block manager (a sliding-window group's
frees blocks that left the window, sliding_blocks.py) and its own block table per sequence. Block
ids are local to a group's pool; the managers are still the only code that hands them out.

`KVCacheCoordinator` offers the scheduler one block manager's interface over all groups: a
sequence is admitted or extended only when every group has room; a prefix-cache hit counts only
the leading blocks that every group still holds (the hash chain is over token ids, the same in
every group); freeing, forking and caching go to every group. Group 0's table is the sequence's
own `block_table` (what single-group code reads); group g > 0 keeps its table in a `GroupTable`
that reads the sequence's tokens.

`make_block_manager` builds the plain manager for a one-group model, so uniform models run
exactly the code they always did.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from serving.attention.layer_spec import KVGroup
from serving.engine.core.block_manager import BlockManager
from serving.engine.core.request import Sequence
from serving.engine.core.sliding_blocks import SlidingWindowBlockManager


@dataclass(eq=False)
class GroupTable:
    """A sequence's block table in a group past the first; the token facts come from it."""

    seq: Sequence
    block_table: list[int] = field(default_factory=list)
    block_hashes: list[int] = field(default_factory=list)
    num_hashed_blocks: int = 0
    block_table_synced: int = 0

    @property
    def token_ids(self) -> list[int]:
        return self.seq.token_ids

    @property
    def num_tokens(self) -> int:
        return self.seq.num_tokens

    @property
    def num_computed_tokens(self) -> int:
        return self.seq.num_computed_tokens

    @num_computed_tokens.setter
    def num_computed_tokens(self, value: int) -> None:
        pass  # group 0's allocate sets the sequence's count; the others agree with it

    @property
    def request(self):
        return self.seq.request


def group_manager(group: KVGroup, num_blocks: int, block_size: int, prefix: bool) -> BlockManager:
    if group.sliding_window is None:
        return BlockManager(num_blocks, block_size, prefix)
    return SlidingWindowBlockManager(num_blocks, block_size, group.sliding_window, prefix)


def make_block_manager(
    groups: list[KVGroup], group_blocks: list[int], block_size: int, prefix: bool
) -> BlockManager | KVCacheCoordinator:
    if len(groups) == 1:
        return group_manager(groups[0], group_blocks[0], block_size, prefix)
    return KVCacheCoordinator(groups, group_blocks, block_size, prefix)


class KVCacheCoordinator:
    def __init__(
        self, groups: list[KVGroup], group_blocks: list[int], block_size: int, prefix: bool
    ):
        self.groups = groups
        self.managers = [
            group_manager(g, n, block_size, prefix)
            for g, n in zip(groups, group_blocks, strict=True)
        ]
        self.block_size = block_size
        self.enable_prefix_caching = prefix
        self.num_blocks = group_blocks[0]

    # ---- what the engine reads ---------------------------------------------------------------
    @property
    def cache_version(self) -> int:
        return sum(m.cache_version for m in self.managers)

    @property
    def prefix_queries(self) -> int:
        return self.managers[0].prefix_queries

    @property
    def prefix_hits(self) -> int:
        return self.managers[0].prefix_hits

    @property
    def usage(self) -> float:
        return max(m.usage for m in self.managers)

    @property
    def num_free_blocks(self) -> int:
        return min(m.num_free_blocks for m in self.managers)

    def tables(self, seq: Sequence) -> list:
        """The sequence's table holder in each group: itself for group 0."""
        views = seq.group_tables
        if views is None:
            views = seq.group_tables = [GroupTable(seq) for _ in self.managers[1:]]
        return [seq, *views]

    # ---- admission ---------------------------------------------------------------------------
    def lookup(self, seq: Sequence) -> tuple[list[tuple[int, ...]], list[int]]:
        """Per leading cached block, its id in each group (and the block's hash)."""
        found = [m.lookup(t) for m, t in zip(self.managers, self.tables(seq), strict=True)]
        n = min(len(ids) for ids, _ in found)
        hits = list(zip(*(ids[:n] for ids, _ in found), strict=True)) if n else []
        return hits, found[0][1][:n]

    def can_allocate(self, seq: Sequence, num_new_tokens: int, hits=None) -> bool:
        if hits is None:
            hits, _ = self.lookup(seq)
        return all(
            m.can_allocate(t, num_new_tokens, [h[g] for h in hits])
            for g, (m, t) in enumerate(zip(self.managers, self.tables(seq), strict=True))
        )

    def allocate(self, seq: Sequence, num_new_tokens: int, hit=None) -> int:
        hits, hashes = hit if hit is not None else self.lookup(seq)
        computed = 0
        for g, (m, t) in enumerate(zip(self.managers, self.tables(seq), strict=True)):
            got = m.allocate(t, num_new_tokens, ([h[g] for h in hits], list(hashes)))
            computed = got if g == 0 else computed
        return computed

    # ---- running -----------------------------------------------------------------------------
    def can_append(self, seq: Sequence, num_new_tokens: int = 1) -> bool:
        return all(
            m.can_append(t, num_new_tokens)
            for m, t in zip(self.managers, self.tables(seq), strict=True)
        )

    def try_append(self, seq: Sequence, num_new_tokens: int) -> list[tuple[int, ...]] | None:
        """Every group's room first (so no group grows when another can't), then the growth;
        copies are (group, src, dst)."""
        if not self.can_append(seq, num_new_tokens):
            return None
        return self.append_slot(seq, num_new_tokens)

    def append_slot(self, seq: Sequence, num_new_tokens: int = 1) -> list[tuple[int, ...]]:
        copies: list[tuple[int, ...]] = []
        for g, (m, t) in enumerate(zip(self.managers, self.tables(seq), strict=True)):
            copies += [(g, src, dst) for src, dst in m.append_slot(t, num_new_tokens)]
        return copies

    # ---- sharing, caching, freeing -----------------------------------------------------------
    def fork(self, parent: Sequence, child: Sequence) -> None:
        for m, p, c in zip(self.managers, self.tables(parent), self.tables(child), strict=True):
            m.fork(p, c)

    def cache_blocks(self, seq: Sequence) -> None:
        for m, t in zip(self.managers, self.tables(seq), strict=True):
            m.cache_blocks(t)

    def free(self, seq: Sequence) -> None:
        for m, t in zip(self.managers, self.tables(seq), strict=True):
            m.free(t)

    def blocks_in_use(self) -> list[int]:
        return [m.num_blocks_in_use() for m in self.managers]
