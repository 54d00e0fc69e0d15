"""Attention backends behind one interface (see base.py); `get_backend` picks one per device."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch

from serving.attention.base import AttentionBackend, AttentionMetadata

# device type -> factory; the GPU engineer registers "cuda" (Triton) with `register_backend`
_REGISTRY: dict[str, Callable[[], AttentionBackend]] = {}


def register_backend(device_type: str, factory: Callable[[], AttentionBackend]) -> None:
    _REGISTRY[device_type] = factory


def get_backend(device: str | torch.device = "cpu") -> AttentionBackend:
    """The registered backend for the device type, else the torch reference (works anywhere)."""
    device_type = torch.device(device).type
    if device_type not in _REGISTRY and device_type == "cuda":
        # the Triton backend registers itself on import, when present
        with contextlib.suppress(ImportError):
            import serving.attention.triton_backend  # noqa: F401
    factory = _REGISTRY.get(device_type)
    if factory is not None:
        return factory()
    from serving.attention.torch_ref import TorchRefBackend

    return TorchRefBackend()


__all__ = ["AttentionBackend", "AttentionMetadata", "get_backend", "register_backend"]
