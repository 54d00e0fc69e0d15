"""A test-only expert fault: one layer's expert e computed with expert e + 1's weights (the
off-by-one expert offset of a broken grouped GEMM).

Off unless a test turns it on (`set_expert_fault`) or the engine process starts with
`VIGIL_TEST_EXPERT_FAULT="<layer>:<expert>"`. It stands in for a wrong expert kernel so the
engine canaries can be shown to catch one; the attention counterpart is
serving/attention/fault.py. When off it costs one global read per MoE layer call.
"""

from __future__ import annotations

import os

import torch

ENV_VAR = "VIGIL_TEST_EXPERT_FAULT"


def _parse(value: str | None) -> tuple[int, int] | None:
    if not value:
        return None
    layer, expert = value.split(":")
    return int(layer), int(expert)


_fault: tuple[int, int] | None = _parse(os.environ.get(ENV_VAR))


def set_expert_fault(layer: int | None, expert: int = 0) -> None:
    """Compute layer `layer`'s expert `expert` with the next expert's weights; `layer=None`
    turns the fault off."""
    global _fault
    _fault = None if layer is None else (int(layer), int(expert))


def faulted_ids(ids: torch.Tensor, layer: int, num_experts: int) -> torch.Tensor:
    fault = _fault
    if fault is None or fault[0] != layer:
        return ids
    wrong = (fault[1] + 1) % num_experts
    return torch.where(ids == fault[1], torch.full_like(ids, wrong), ids)
