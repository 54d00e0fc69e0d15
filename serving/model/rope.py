"""Rotary position embedding applied to flattened step tokens (HF's rotate-half layout)."""

from __future__ import annotations

import torch

from serving.loader.rope import rope_inv_freq


class RotaryEmbedding(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.register_buffer("inv_freq", rope_inv_freq(config).float(), persistent=False)

    def cos_sin(
        self, positions: torch.Tensor, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # float32 angles like HF, then cast: keeps greedy tokens identical to the oracle
        freqs = positions.float()[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: [num_tokens, num_heads, head_dim]; cos/sin: [num_tokens, head_dim]."""
    return x * cos[:, None, :] + rotate_half(x) * sin[:, None, :]
