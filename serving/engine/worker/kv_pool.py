"""How many KV blocks each KV-cache group gets out of the memory budget.

A full-attention group's blocks bound how long a context can be; a sliding-window group needs at
most about one window (plus a step's chunk) of blocks per running sequence, since its manager
frees what falls out of the window (serving/engine/core/sliding_blocks.py). So sliding groups get
that cap, `max_num_seqs` times over, and the full groups share the rest of the budget, each the
same number of blocks (a sequence takes one block per `block_size` tokens in every full group).
Memory in use is then sum over groups of (blocks in use x `KVGroup.bytes_per_block`).
"""

from __future__ import annotations

from serving.attention.layer_spec import KVGroup


def sliding_blocks_per_seq(group: KVGroup, block_size: int, max_num_batched_tokens: int) -> int:
    """Most blocks one sequence holds in a sliding group: the window before its first query
    and one step's chunk, each rounded out to whole blocks."""
    window = group.sliding_window or 0
    return -(-(window - 1 + max_num_batched_tokens) // block_size) + 2


def plan_group_blocks(
    groups: list[KVGroup],
    block_size: int,
    element_size: int,
    budget_bytes: int,
    max_num_seqs: int,
    max_num_batched_tokens: int,
) -> list[int]:
    per_block = [g.bytes_per_block(block_size, element_size) for g in groups]
    if len(groups) == 1:
        return [budget_bytes // per_block[0]]
    window_blocks = -(-max(g.sliding_window or 0 for g in groups) // block_size) + 2
    chunk = -(-max_num_batched_tokens // block_size)
    caps = [
        max_num_seqs * window_blocks + chunk + 1 if g.is_sliding else None  # + the null block
        for g in groups
    ]
    sliding_cost = sum(c * b for c, b in zip(caps, per_block, strict=True) if c is not None)
    full_bytes = sum(b for c, b in zip(caps, per_block, strict=True) if c is None)
    if full_bytes and sliding_cost < budget_bytes:
        n = (budget_bytes - sliding_cost) // full_bytes
        return [n if c is None else c for c in caps]
    n = budget_bytes // sum(per_block)
    return [n if c is None else min(n, c) for c in caps]


def check_pool(
    groups: list[KVGroup], counts: list[int], block_size: int, max_num_batched_tokens: int
) -> None:
    """Raises ValueError when a group cannot hold one sequence alone."""
    for g, n in zip(groups, counts, strict=True):
        need = (
            2
            if not g.is_sliding
            else sliding_blocks_per_seq(g, block_size, max_num_batched_tokens) + 1
        )
        if n < need:
            kind = f"sliding-window ({g.sliding_window})" if g.is_sliding else "full-attention"
            raise ValueError(
                f"the {kind} KV group of layers {list(g.layers)} holds {n} blocks; one sequence "
                f"needs {need}: raise kv_cache_memory_mb"
            )


def max_len_of_pool(groups: list[KVGroup], counts: list[int], block_size: int, limit: int) -> int:
    """A sequence must fit the full-attention pools alone (or preemption could never make room);
    sliding groups hold one window whatever the length."""
    full = [n for g, n in zip(groups, counts, strict=True) if not g.is_sliding]
    return min([limit] + [n * block_size for n in full])
