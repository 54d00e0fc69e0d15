"""How one model is cut across tensor-parallel ranks: pure arithmetic over the config, shared by
the loader (what to slice) and the layers (what shapes to build).

Heads are split by KV group, so every rank's query heads read only its own KV heads. With fewer
KV heads than ranks, each KV head is replicated on `world_size // num_kv_heads` ranks and its
group's query heads are split among them. Splits are balanced (sizes differ by at most one), so
shapes such as 9 query heads over 2 ranks work; the vocabulary is padded to equal shards because
the logits are gathered with one all-gather of equal parts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the loader imports this module (shard sizes) through its package
    from serving.loader.config import ModelConfig


def balanced_range(n: int, parts: int, index: int) -> tuple[int, int]:
    """[start, end) of part `index` when n items are cut into `parts` nearly equal runs."""
    base, extra = divmod(n, parts)
    start = index * base + min(index, extra)
    return start, start + base + (1 if index < extra else 0)


@dataclass(frozen=True)
class HeadShard:
    q_start: int  # first query head of this rank
    q_count: int
    kv_start: int  # first KV head of this rank
    kv_count: int


def head_shard(num_heads: int, num_kv_heads: int, world_size: int, rank: int) -> HeadShard:
    group = num_heads // num_kv_heads  # query heads per KV head
    if num_kv_heads >= world_size:
        kv_start, kv_end = balanced_range(num_kv_heads, world_size, rank)
        return HeadShard(kv_start * group, (kv_end - kv_start) * group, kv_start, kv_end - kv_start)
    if world_size % num_kv_heads:
        raise ValueError(
            f"tensor parallel size {world_size} must be a multiple of num_key_value_heads="
            f"{num_kv_heads} when it is larger (each KV head is replicated on whole ranks)"
        )
    ranks_per_kv = world_size // num_kv_heads
    if group < ranks_per_kv:
        raise ValueError(
            f"tensor parallel size {world_size} leaves a rank without query heads "
            f"({num_heads} heads, {num_kv_heads} KV heads)"
        )
    kv = rank // ranks_per_kv
    q_start, q_end = balanced_range(group, ranks_per_kv, rank % ranks_per_kv)
    return HeadShard(kv * group + q_start, q_end - q_start, kv, 1)


def vocab_shard_size(vocab_size: int, world_size: int) -> int:
    """Rows per rank of the padded vocabulary (every rank holds the same number)."""
    return -(-vocab_size // world_size)


def vocab_range(vocab_size: int, world_size: int, rank: int) -> tuple[int, int]:
    """[start, end) of the real token ids rank `rank` holds (end - start may be < shard size)."""
    per = vocab_shard_size(vocab_size, world_size)
    start = min(rank * per, vocab_size)
    return start, min(start + per, vocab_size)


def check_partition(config: ModelConfig, world_size: int) -> None:
    """Raise ValueError naming the reason when `config` cannot be split over `world_size` ranks."""
    if world_size < 1:
        raise ValueError(f"tensor parallel size must be at least 1, got {world_size}")
    for rank in range(world_size):
        head_shard(config.num_attention_heads, config.num_key_value_heads, world_size, rank)
    if config.intermediate_size < world_size:
        raise ValueError(
            f"intermediate_size={config.intermediate_size} is smaller than {world_size} ranks"
        )


def rank_config(config: ModelConfig, world_size: int, rank: int) -> ModelConfig:
    """`config` with this rank's query and KV head counts: what its KV cache holds."""
    shard = head_shard(config.num_attention_heads, config.num_key_value_heads, world_size, rank)
    return replace(config, num_attention_heads=shard.q_count, num_key_value_heads=shard.kv_count)
