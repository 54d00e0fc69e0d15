"""Megatron-style tensor-parallel layers over torch.distributed.

Column-parallel linears hold a slice of the output features and need no communication; the
row-parallel linear that follows holds the matching slice of its input features, so each rank's
product is a partial sum and one all-reduce completes it (bias added once, after it); the
all-reduce is the context's (NCCL, or symmetric memory for small CUDA messages: all_reduce.py). The
vocabulary-parallel embedding looks up only its own token range (other ids give zero rows) and
all-reduces; the LM head computes its vocabulary slice and all-gathers the logits.

Which rows/columns each rank holds is decided in serving/distributed/partition.py and sliced at
load time (serving/loader/shard.py); these modules only hold the local tensors.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from serving.distributed.context import ParallelContext
from serving.distributed.partition import vocab_range, vocab_shard_size
from serving.kernels.linear import linear


class ColumnParallelLinear(nn.Module):
    """y[:, local outputs] = x @ W_local.T (+ b_local); the output stays split across ranks."""

    def __init__(self, in_features: int, local_out_features: int, bias: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(local_out_features, in_features))
        self.bias = nn.Parameter(torch.empty(local_out_features)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """x holds this rank's slice of the input features; the partial products are all-reduced."""

    def __init__(self, local_in_features: int, out_features: int, bias: bool, tp: ParallelContext):
        super().__init__()
        self.tp = tp
        self.weight = nn.Parameter(torch.empty(out_features, local_in_features))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.reduce(linear(x, self.weight))

    def reduce(self, partial: torch.Tensor) -> torch.Tensor:
        """The sum of every rank's partial product (in place), plus the bias once."""
        total = self.tp.all_reduce(partial)
        return total if self.bias is None else total + self.bias


class VocabParallelEmbedding(nn.Module):
    """Rows [start, end) of the embedding, padded to the shard size every rank shares."""

    def __init__(self, vocab_size: int, hidden_size: int, tp: ParallelContext):
        super().__init__()
        self.tp = tp
        self.vocab_size = vocab_size
        self.start, self.end = vocab_range(vocab_size, tp.world_size, tp.rank)
        self.weight = nn.Parameter(
            torch.empty(vocab_shard_size(vocab_size, tp.world_size), hidden_size)
        )

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        outside = (input_ids < self.start) | (input_ids >= self.end)
        local = (input_ids - self.start).masked_fill(outside, 0)
        hidden = F.embedding(local, self.weight).masked_fill(outside[:, None], 0)
        return self.tp.all_reduce(hidden)


def gather_logits(local_logits: torch.Tensor, vocab_size: int, tp: ParallelContext) -> torch.Tensor:
    """[rows, shard] on every rank -> [rows, vocab] on every rank (padding columns dropped)."""
    parts = [torch.empty_like(local_logits) for _ in range(tp.world_size)]
    dist.all_gather(parts, local_logits.contiguous(), group=tp.group)
    return torch.cat(parts, dim=-1)[:, :vocab_size]


def column_linear(
    in_features: int, local_out: int, bias: bool, tp: ParallelContext | None
) -> nn.Module:
    """A plain nn.Linear without tensor parallelism (the single-GPU path stays unchanged)."""
    if tp is None:
        return nn.Linear(in_features, local_out, bias=bias)
    return ColumnParallelLinear(in_features, local_out, bias)


def row_linear(
    local_in: int, out_features: int, bias: bool, tp: ParallelContext | None
) -> nn.Module:
    if tp is None:
        return nn.Linear(local_in, out_features, bias=bias)
    return RowParallelLinear(local_in, out_features, bias, tp)
