"""Attention backends behind one interface (see base.py); `get_backend` picks one per device."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch

from serving.attention.base import AttentionBackend, AttentionMetadata

# device type -> factory; "cuda" is the Triton backend where Triton is installed
_REGISTRY: dict[str, Callable[[], AttentionBackend]] = {}


def register_backend(device_type: str, factory: Callable[[], AttentionBackend]) -> None:
    _REGISTRY[device_type] = factory


def _register_triton() -> None:
    from serving.attention.triton_backend import TritonAttentionBackend
    from serving.kernels import HAS_TRITON

    if HAS_TRITON:
        register_backend("cuda", TritonAttentionBackend)


def get_backend(device: str | torch.device = "cpu") -> AttentionBackend:
    """The registered backend for the device type, else the torch reference (works anywhere)."""
    device_type = torch.device(device).type
    if device_type not in _REGISTRY and device_type == "cuda":
        with contextlib.suppress(ImportError):
            _register_triton()
    factory = _REGISTRY.get(device_type)
    if factory is not None:
        return factory()
    from serving.attention.torch_ref import TorchRefBackend

    return TorchRefBackend()


__all__ = ["AttentionBackend", "AttentionMetadata", "get_backend", "register_backend"]
