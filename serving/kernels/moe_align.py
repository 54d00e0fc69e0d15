"""Tokens sorted by expert, each expert's run padded to a whole tile: the layout the grouped
expert GEMM (serving/kernels/moe_gemm.py) reads.

A step routes T tokens to k experts each, N = T * k (token, slot) pairs; pair p is token
p // k's slot p % k. The pairs are sorted by expert (stably, so a token's pairs keep their order)
and each expert's run is padded up to a multiple of `block_m` with the sentinel N, so that every
tile of `block_m` rows belongs to one expert. Everything is torch ops on the routing's device and
of static size (no host read, no per-expert Python loop): the layout can be built inside a CUDA
graph. The padded length is bounded by N + min(E, N) * (block_m - 1): at most min(E, N) experts
are non-empty and each pads by fewer than `block_m` rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ExpertLayout:
    sorted_pairs: torch.Tensor  # int32 [capacity]: (token, slot) pair ids by expert, N = padding
    tile_experts: torch.Tensor  # int32 [capacity // block_m]: each tile's expert, -1 past the end
    num_rows: torch.Tensor  # int32 [1]: padded rows in use (a multiple of block_m)
    counts: torch.Tensor  # int32 [E]: pairs routed to each expert
    num_pairs: int  # N = tokens * top_k
    block_m: int

    @property
    def capacity(self) -> int:
        return self.sorted_pairs.shape[0]


def capacity_for(num_pairs: int, num_experts: int, block_m: int) -> int:
    """Rows the sorted layout needs at most, rounded up to whole tiles."""
    rows = num_pairs + min(num_experts, num_pairs) * (block_m - 1)
    return max(block_m, -(-rows // block_m) * block_m)


def align_by_expert(topk_ids: torch.Tensor, num_experts: int, block_m: int) -> ExpertLayout:
    """The sorted, tile-padded layout of `topk_ids` [T, k] (expert ids in [0, num_experts))."""
    device = topk_ids.device
    flat = topk_ids.reshape(-1).to(torch.int64)
    n = flat.numel()
    capacity = capacity_for(n, num_experts, block_m)
    counts = torch.zeros(num_experts, dtype=torch.int64, device=device)
    counts.scatter_add_(0, flat, torch.ones_like(flat))
    padded = (counts + block_m - 1) // block_m * block_m
    padded_end = torch.cumsum(padded, 0)
    padded_start = padded_end - padded
    start = torch.cumsum(counts, 0) - counts
    order = torch.argsort(flat, stable=True)
    expert_of_sorted = flat[order]
    rank = torch.arange(n, device=device) - start[expert_of_sorted]
    sorted_pairs = torch.full((capacity,), n, dtype=torch.int64, device=device)
    sorted_pairs[padded_start[expert_of_sorted] + rank] = order
    tile_start = torch.arange(0, capacity, block_m, device=device)
    tile_experts = torch.searchsorted(padded_end, tile_start, right=True)
    total = padded_end[-1:] if num_experts else torch.zeros(1, dtype=torch.int64, device=device)
    tile_experts = torch.where(tile_start < total, tile_experts, -1)
    return ExpertLayout(
        sorted_pairs=sorted_pairs.to(torch.int32),
        tile_experts=tile_experts.to(torch.int32),
        num_rows=total.to(torch.int32),
        counts=counts.to(torch.int32),
        num_pairs=n,
        block_m=block_m,
    )
