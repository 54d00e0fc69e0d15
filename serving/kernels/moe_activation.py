"""The experts' gated activations over a [rows, 2 * I] gate/up projection (gate columns first,
then up): SwiGLU (Qwen3-MoE, Mixtral) and gpt-oss's clamped variant.

gpt-oss (HF transformers' GptOssExperts): gate clamped above at `limit`, up clamped to
[-limit, limit], out = (up + 1) * gate * sigmoid(alpha * gate). Its checkpoints interleave gate
and up columns; the loader de-interleaves them so both activations read one layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

SILU = "silu"
SWIGLU_OAI = "swiglu_oai"


@dataclass(frozen=True)
class ExpertActivation:
    kind: str = SILU  # SILU | SWIGLU_OAI
    alpha: float = 1.702  # SWIGLU_OAI only
    limit: float = 7.0  # SWIGLU_OAI only


def gated_activation(gate_up: torch.Tensor, act: ExpertActivation) -> torch.Tensor:
    """[rows, 2I] -> [rows, I] with torch ops (any device; capturable in a CUDA graph)."""
    gate, up = gate_up.chunk(2, dim=-1)
    if act.kind == SILU:
        return F.silu(gate) * up
    if act.kind == SWIGLU_OAI:
        gate = gate.clamp(max=act.limit)
        up = up.clamp(min=-act.limit, max=act.limit)
        return (up + 1) * (gate * torch.sigmoid(gate * act.alpha))
    raise ValueError(f"unknown expert activation {act.kind!r}")
