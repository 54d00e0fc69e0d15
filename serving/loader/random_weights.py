"""Random weights made directly on the device, one tensor at a time, optionally only one
tensor-parallel rank's shard of each: benchmarks and GPU tests of shapes too large to build on the
host. Each full tensor comes from its own seeded generator, so a rank's shard is exactly the slice
of what a single-device run draws (TP=1 and TP=N hold the same model)."""

from __future__ import annotations

from typing import Any

import torch

from serving.loader.config import ModelConfig, config_from_hf
from serving.loader.load import LoadedModel, expected_tensor_names
from serving.loader.moe_config import MoEConfig
from serving.loader.shard import ShardSpec, apply_slice, tensor_slice


def _full_shape(name: str, config: ModelConfig) -> tuple[int, ...]:
    h = config.hidden_size
    leaf = name.rsplit(".", 2)[-2]
    if name in ("model.embed_tokens.weight", "lm_head.weight"):
        return (config.vocab_size, h)
    if name.endswith(".self_attn.sinks"):
        return (config.num_attention_heads,)
    if config.moe is not None and ".mlp." in name:
        return _expert_shape(name, config.moe, h) or _full_shape_dense(name, config, leaf)
    return _full_shape_dense(name, config, leaf)


def _expert_shape(name: str, moe: MoEConfig, h: int) -> tuple[int, ...] | None:
    """The experts stacked per layer (moe_config.has_fused_experts; gpt-oss transposed)."""
    e, i = moe.num_experts, moe.intermediate_size
    gpt_oss = moe.expert_layout != "split"
    shapes = {
        ".mlp.gate.weight": (e, h),
        ".mlp.router.weight": (e, h),
        ".mlp.router.bias": (e,),
        ".mlp.experts.gate_up_proj": (e, h, 2 * i) if gpt_oss else (e, 2 * i, h),
        ".mlp.experts.down_proj": (e, i, h) if gpt_oss else (e, h, i),
        ".mlp.experts.gate_up_proj_bias": (e, 2 * i),
        ".mlp.experts.down_proj_bias": (e, h),
    }
    return next((shape for suffix, shape in shapes.items() if name.endswith(suffix)), None)


def _full_shape_dense(name: str, config: ModelConfig, leaf: str) -> tuple[int, ...]:
    h, hd = config.hidden_size, config.head_dim
    q, kv = config.num_attention_heads * hd, config.num_key_value_heads * hd
    table = {
        "q_proj": (q, h),
        "k_proj": (kv, h),
        "v_proj": (kv, h),
        "o_proj": (h, q),
        "gate_proj": (config.intermediate_size, h),
        "up_proj": (config.intermediate_size, h),
        "down_proj": (h, config.intermediate_size),
        "q_norm": (hd,),
        "k_norm": (hd,),
    }
    shape = table.get(leaf, (h,))  # the remaining names are hidden-size norms
    return shape[:1] if name.endswith(".bias") else shape


def random_loaded(
    hf_config: dict[str, Any],
    *,
    seed: int = 0,
    std: float = 0.02,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.bfloat16,
    shard: ShardSpec | None = None,
    name: str = "random",
) -> LoadedModel:
    """A LoadedModel (no tokenizer) of random weights for an HF config dict; norms are 1 + noise."""
    config = config_from_hf(dict(hf_config), {}, name)
    state: dict[str, torch.Tensor] = {}
    for i, tensor_name in enumerate(sorted(expected_tensor_names(config, config.moe is not None))):
        gen = torch.Generator(device=device).manual_seed(seed * 100_003 + i)
        full = torch.randn(
            _full_shape(tensor_name, config), generator=gen, device=device, dtype=torch.float32
        )
        full = full * std + (1.0 if "norm" in tensor_name else 0.0)
        cut = None if shard is None else tensor_slice(tensor_name, config, shard)
        state[tensor_name] = apply_slice(full, cut).to(dtype)
        del full
    return LoadedModel(config=config, state_dict=state, tokenizer=None, source=name)
