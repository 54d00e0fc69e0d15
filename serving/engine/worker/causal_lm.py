"""`CausalLM`: what the worker calls on a model that serving/model built (the Llama family,
Gemma, mixture-of-experts, tensor-parallel shards alike). `build_model` hands back a plain
`nn.Module`; `as_causal_lm` names the surface every family implements."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol, cast

import torch

if TYPE_CHECKING:
    from serving.attention.base import AttentionBackend, AttentionMetadata


class CausalLM(Protocol):
    config: Any  # serving/loader's ModelConfig, or a family's own
    layers: torch.nn.ModuleList

    def __call__(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        kv_caches: list[tuple[torch.Tensor, torch.Tensor]],
        meta: AttentionMetadata,
        backend: AttentionBackend,
    ) -> torch.Tensor:
        """Hidden states of every input row."""
        ...

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor: ...

    def parameters(self, recurse: bool = True) -> Iterator[torch.nn.Parameter]: ...

    def modules(self) -> Iterator[torch.nn.Module]: ...


def as_causal_lm(model: torch.nn.Module) -> CausalLM:
    return cast(CausalLM, model)
