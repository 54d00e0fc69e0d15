"""Rotary position embedding applied to flattened step tokens (HF's rotate-half layout)."""

from __future__ import annotations

import torch

from serving.attention.layer_spec import LayerSpec
from serving.loader.config import ModelConfig
from serving.loader.rope import attention_factor_for, inv_freq_for, rope_inv_freq


class RotaryEmbedding(torch.nn.Module):
    def __init__(self, config: ModelConfig, spec: LayerSpec | None = None):
        super().__init__()
        inv_freq = (
            rope_inv_freq(config)
            if spec is None
            else inv_freq_for(spec.rope.theta, spec.head_dim, spec.rope.scaling_dict)
        )
        self.inv_freq: torch.Tensor
        self.register_buffer("inv_freq", inv_freq.float(), persistent=False)
        scaling = config.rope_scaling if spec is None else spec.rope.scaling_dict
        self.attention_factor = attention_factor_for(scaling)  # YaRN's cos/sin scale

    def cos_sin(
        self, positions: torch.Tensor, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # float32 angles like HF, then cast: keeps greedy tokens identical to the oracle
        freqs = positions.float()[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        if self.attention_factor != 1.0:
            return (
                (emb.cos() * self.attention_factor).to(dtype),
                (emb.sin() * self.attention_factor).to(dtype),
            )
        return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: [num_tokens, num_heads, head_dim]; cos/sin: [num_tokens, head_dim]."""
    return x * cos[:, None, :] + rotate_half(x) * sin[:, None, :]
