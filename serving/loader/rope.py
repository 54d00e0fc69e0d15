"""RoPE inverse frequencies for a `ModelConfig`, with the scaling types we support.

Computed in float32 exactly as HF transformers does, so our logits match its reference bit for bit
as far as possible.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from serving.loader.config import ModelConfig


def default_inv_freq(theta: float, dim: int) -> torch.Tensor:
    exponents = torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float32) / dim
    return 1.0 / (theta**exponents)


def rope_inv_freq(config: ModelConfig) -> torch.Tensor:
    """float32 [head_dim // 2] for a uniform model's layers (see `inv_freq_for`)."""
    return inv_freq_for(config.rope_theta, config.head_dim, config.rope_scaling)


def inv_freq_for(theta: float, head_dim: int, scaling: dict[str, Any] | None) -> torch.Tensor:
    """float32 [head_dim // 2]. Scaling types:
    - None: plain RoPE with `rope_theta`;
    - "linear": every frequency divided by `factor` (position interpolation);
    - "llama3": Llama-3.1's smooth low/high-frequency split (`factor`, `low_freq_factor`,
      `high_freq_factor`, `original_max_position_embeddings`);
    - "freq_factors": per-frequency divisors (`factors`, a list of head_dim // 2), as llama.cpp
      stores Llama-3.1 scaling in a GGUF's `rope_freqs.weight` tensor;
    - "proportional" (Gemma 4's full layers): only the first `partial_rotary_factor` of the
      head's angles rotate, with exponents over the whole head_dim; the rest have frequency 0
      (cos 1, sin 0: passed through), all divided by `factor`.
    """
    inv_freq = default_inv_freq(theta, head_dim)
    if scaling is None:
        return inv_freq
    kind = scaling.get("rope_type")
    if kind == "linear":
        return inv_freq / float(scaling["factor"])
    if kind == "freq_factors":
        factors = torch.tensor(scaling["factors"], dtype=torch.float32)
        if factors.shape != inv_freq.shape:
            raise ValueError(
                f"rope freq_factors has {factors.numel()} entries, expected {inv_freq.numel()}"
            )
        return inv_freq / factors
    if kind == "llama3":
        return _llama3(inv_freq, scaling)
    if kind == "yarn":
        return _yarn(theta, head_dim, scaling)
    if kind == "proportional":
        angles = int(float(scaling.get("partial_rotary_factor", 1.0)) * head_dim // 2)
        exponents = torch.arange(0, 2 * angles, 2, dtype=torch.int64).to(torch.float32) / head_dim
        rotated = 1.0 / (theta**exponents)
        padded = torch.cat((rotated, torch.zeros(head_dim // 2 - angles, dtype=torch.float32)))
        return padded / float(scaling.get("factor", 1.0))
    raise ValueError(f"unsupported rope scaling type {kind!r}")


def attention_factor_for(scaling: dict[str, Any] | None) -> float:
    """The factor cos and sin are multiplied by (1 but for YaRN: its `attention_factor`, else
    0.1 * ln(factor) + 1)."""
    if scaling is None or scaling.get("rope_type") != "yarn":
        return 1.0
    if scaling.get("attention_factor") is not None:
        return float(scaling["attention_factor"])
    factor = float(scaling["factor"])
    return 1.0 if factor <= 1 else 0.1 * math.log(factor) + 1.0


def _yarn(theta: float, head_dim: int, s: dict[str, Any]) -> torch.Tensor:
    """YaRN (HF transformers' `_compute_yarn_parameters`): high frequencies kept, low ones
    interpolated by `factor`, a linear ramp between the dimensions that turn `beta_fast` and
    `beta_slow` times over `original_max_position_embeddings` (the range rounded outwards unless
    `truncate` is false)."""
    factor = float(s["factor"])
    old_len = float(s["original_max_position_embeddings"])
    fast, slow = float(s.get("beta_fast") or 32), float(s.get("beta_slow") or 1)

    def dim_of(rotations: float) -> float:
        return head_dim * math.log(old_len / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = dim_of(fast), dim_of(slow)
    if s.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001
    pos_freqs = theta ** (torch.arange(0, head_dim, 2).to(dtype=torch.float) / head_dim)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    dims = torch.arange(head_dim // 2, dtype=torch.float32)
    ramp = torch.clamp((dims - low) / (high - low), 0, 1)
    keep = 1 - ramp
    return interpolation * (1 - keep) + extrapolation * keep


def _llama3(inv_freq: torch.Tensor, s: dict[str, Any]) -> torch.Tensor:
    factor = float(s["factor"])
    low, high = float(s["low_freq_factor"]), float(s["high_freq_factor"])
    old_len = float(s["original_max_position_embeddings"])
    low_freq_wavelen, high_freq_wavelen = old_len / low, old_len / high
    wavelen = 2 * math.pi / inv_freq
    # long wavelengths (low frequencies) are interpolated, short ones kept, the middle blended
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)
