"""Per-layer attention geometry, and the KV-cache groups it implies.

Every decoder layer owns a `LayerSpec`: its query and KV head counts, head_dim, sliding window
(None: full attention), attention-logit soft-cap, softmax scale and rotary settings. Layers with
the same cache geometry (KV heads, head_dim, window) form one `KVGroup`: one paged cache tensor,
one block pool and one block table per sequence (serving/engine/core/kv_coordinator.py). A
model whose layers all agree has one group and runs exactly as a uniform model always did.

Window convention (HF transformers' `sliding_window_overlay`): a query at position q sees the
keys at positions k with q - window < k <= q, i.e. itself and the `window - 1` tokens before it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RopeSpec:
    theta: float
    # None: plain RoPE; else {"rope_type": "linear" | "llama3" | "freq_factors" | "proportional",
    # ...} (serving/loader/rope.py)
    scaling: tuple[tuple[str, Any], ...] | None = None

    @property
    def scaling_dict(self) -> dict[str, Any] | None:
        return None if self.scaling is None else dict(self.scaling)


@dataclass(frozen=True)
class LayerSpec:
    num_heads: int
    num_kv_heads: int
    head_dim: int
    scale: float  # softmax scale (head_dim**-0.5 for most families)
    rope: RopeSpec
    sliding_window: int | None = None  # None: full attention
    softcap: float | None = None  # attention logits -> softcap * tanh(logits / softcap)
    kv_source: int | None = None  # a layer that reads another layer's cache (writes none)

    @property
    def cache_key(self) -> tuple[int, int, int | None]:
        return (self.num_kv_heads, self.head_dim, self.sliding_window)


@dataclass(frozen=True)
class KVGroup:
    """Layers sharing one cache geometry: `layers` in model order."""

    num_kv_heads: int
    head_dim: int
    sliding_window: int | None
    layers: tuple[int, ...] = field(default_factory=tuple)

    @property
    def is_sliding(self) -> bool:
        return self.sliding_window is not None

    def bytes_per_block(self, block_size: int, element_size: int) -> int:
        """K and V of every layer of the group, one block of tokens."""
        return 2 * len(self.layers) * block_size * self.num_kv_heads * self.head_dim * element_size


def kv_groups(specs: list[LayerSpec]) -> list[KVGroup]:
    """Group the cache-owning layers by geometry; full-attention groups first (group 0 bounds a
    sequence's length), then sliding ones, each in order of its first layer."""
    keys: dict[tuple[int, int, int | None], list[int]] = {}
    for i, spec in enumerate(specs):
        if spec.kv_source is None:
            keys.setdefault(spec.cache_key, []).append(i)
    groups = [KVGroup(k[0], k[1], k[2], tuple(layers)) for k, layers in keys.items()]
    return sorted(groups, key=lambda g: (g.is_sliding, g.layers[0]))


def layer_slots(specs: list[LayerSpec], groups: list[KVGroup]) -> list[tuple[int, int]]:
    """For each layer, the (group, index within the group) of the cache it reads; a layer with a
    `kv_source` reads its source's."""
    where: dict[int, tuple[int, int]] = {}
    for g, group in enumerate(groups):
        for j, layer in enumerate(group.layers):
            where[layer] = (g, j)
    return [where[i if s.kv_source is None else s.kv_source] for i, s in enumerate(specs)]
