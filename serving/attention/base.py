"""The attention-backend interface. The runner builds one `AttentionMetadata` per step; every
layer's attention calls `backend.write_kv` then `backend.forward`. The torch reference backend is
the oracle; GPU kernels (Triton) implement the same two calls.

Step layout: the step's tokens are flattened across sequences, sequence i owning rows
`query_start_loc[i]:query_start_loc[i+1]`. Sequence i has `seq_lens[i]` tokens of context in
total, the last `query_lens[i]` of which are this step's queries (prefill chunk or one decode
token); the first `seq_lens[i] - query_lens[i]` are already in the paged cache (earlier chunks or
prefix-cache hits). Attention is causal within that context.

A layer with a sliding `window` sees, from a query at position q, the keys at positions
q - window < k <= q; block-table entries wholly before that may point at the group's null block
(freed blocks, serving/engine/core/sliding_blocks.py) and are never read. A `softcap` bounds the
scaled logits to (-softcap, softcap) by softcap * tanh(logits / softcap) before the softmax.
`sinks` (gpt-oss) are one logit per query head that joins every softmax of that head as a key
with a zero value: it takes a share of the denominator and adds nothing to the output.

KV cache per layer: `k_cache`, `v_cache` of shape [num_blocks, block_size, num_kv_heads, head_dim].
Token t of sequence i lives in block `block_tables[i, t // block_size]`, row `t % block_size`;
`slot_mapping[j] = block * block_size + row` for each new token j (-1: do not write).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

import torch


@dataclass
class AttentionMetadata:
    query_start_loc: torch.Tensor  # int32 [num_seqs + 1], cumulative query lengths
    seq_lens: torch.Tensor  # int32 [num_seqs], context length including this step's tokens
    slot_mapping: torch.Tensor  # int64 [num_tokens]
    block_tables: torch.Tensor  # int32 [num_seqs, max_blocks_per_seq], padded with 0
    max_query_len: int
    max_seq_len: int
    num_decode_tokens: int = (
        0  # sequences with query_len 1 come first when > 0 (decode-only fast path)
    )
    # host copies so CPU code needs no device sync
    query_lens_cpu: list[int] | None = None
    seq_lens_cpu: list[int] | None = None
    # a prefill CUDA graph's layout (engine/worker/cuda_graphs.py), decode rows anywhere:
    # the decode kernel runs over every sequence with these lengths (0 but for one-token queries)
    # and rows (a non-decode sequence's points at a row the prefill kernel rewrites after it), and
    # the prefill kernel skips one-token queries. None: decode rows lead, `num_decode_tokens` of
    # them.
    decode_seq_lens: torch.Tensor | None = None
    decode_rows: torch.Tensor | None = None
    # KV-cache groups past the first (serving/attention/layer_spec.py): each group's
    # (block_tables, slot_mapping); the fields above are group 0's
    group_tables: list[tuple[torch.Tensor, torch.Tensor]] | None = None

    def for_groups(self, count: int) -> list[AttentionMetadata]:
        """One metadata per KV-cache group: the same step, each group's own blocks."""
        if count == 1 or not self.group_tables:
            return [self] * count
        rest = [
            replace(self, block_tables=tables, slot_mapping=slots, group_tables=None)
            for tables, slots in self.group_tables
        ]
        return [self, *rest]

    @property
    def num_seqs(self) -> int:
        return self.seq_lens.shape[0]

    @property
    def is_decode_only(self) -> bool:
        return self.max_query_len == 1


class AttentionBackend(Protocol):
    name: str

    def write_kv(
        self,
        key: torch.Tensor,  # [num_tokens, num_kv_heads, head_dim]
        value: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> None: ...

    def forward(
        self,
        query: torch.Tensor,  # [num_tokens, num_heads, head_dim]
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
        scale: float,
        window: int | None = None,  # sliding window: keys q - window < k <= q (None: all)
        softcap: float | None = None,  # logits -> softcap * tanh(logits / softcap)
        sinks: torch.Tensor | None = None,  # [num_heads] logits in each softmax's denominator
    ) -> torch.Tensor: ...  # [num_tokens, num_heads, head_dim]
