"""A test-only numeric fault: one layer's attention scale multiplied by a factor.

Off unless a test turns it on (`set_scale_fault`) or the engine process starts with
`VIGIL_TEST_ATTENTION_SCALE_FAULT="<layer>:<factor>"`. It stands in for a silent numerics change
of the serving stack (a kernel, driver or quantisation upgrade) so the engine canaries can be
shown to catch one. When off it costs one global read per attention call.
"""

from __future__ import annotations

import os
import weakref

import torch

ENV_VAR = "VIGIL_TEST_ATTENTION_SCALE_FAULT"


def _parse(value: str | None) -> tuple[int, float] | None:
    if not value:
        return None
    layer, factor = value.split(":")
    return int(layer), float(factor)


_fault: tuple[int, float] | None = _parse(os.environ.get(ENV_VAR))


def set_scale_fault(layer: int | None, factor: float = 1.0) -> None:
    """Multiply layer `layer`'s attention scale by `factor`; `layer=None` turns the fault off."""
    global _fault
    _fault = None if layer is None else (int(layer), float(factor))


# id of a registered K cache view -> (a weak reference to that view, its layer): the views the
# runner hands each layer are the objects attention receives, and a dead one never matches
_layers: dict[int, tuple[weakref.ref[torch.Tensor], int]] = {}


def register_layer_caches(kv_caches: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """The runner names each layer's cache views (several KV-cache groups: several tensors);
    the latest runner's replace any earlier ones."""
    _layers.clear()
    for i, (k_cache, _) in enumerate(kv_caches):
        _layers.setdefault(id(k_cache), (weakref.ref(k_cache), i))


def layer_of(k_cache: torch.Tensor) -> int:
    """The layer a K (or V) cache view belongs to: as registered by the runner, else from the
    one-tensor layout [layers, 2, blocks, block_size, kv_heads, head_dim], where a view's storage
    offset divided by one layer's K+V size is its layer index."""
    found = _layers.get(id(k_cache))
    if found is not None and found[0]() is k_cache:
        return found[1]
    return k_cache.storage_offset() // (2 * k_cache.numel())


def faulted_scale(scale: float, k_cache: torch.Tensor) -> float:
    fault = _fault
    if fault is None or layer_of(k_cache) != fault[0]:
        return scale
    return scale * fault[1]
