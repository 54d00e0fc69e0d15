"""Mixture-of-experts facts of a config.json: how many experts, how many a token takes, how the
router turns logits into weights, which layers are sparse, and the experts' activation; and the
expert tensors an HF checkpoint holds. Options this engine does not implement are refused, each
by name.

Routers (HF transformers' definitions):
- `softmax_topk` (Qwen3-MoE): softmax over all experts in fp32, the top k, renormalised to sum
  to 1 when `norm_topk_prob`;
- `topk_softmax` (gpt-oss): the top k router logits (the router has a bias), softmax over them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from serving.loader.errors import ModelLoadError

SOFTMAX_TOPK = "softmax_topk"
TOPK_SOFTMAX = "topk_softmax"
MOE_ARCHS = ("qwen3_moe", "gpt_oss")


@dataclass(frozen=True)
class MoEConfig:
    num_experts: int
    top_k: int
    intermediate_size: int  # of one expert
    router: str  # SOFTMAX_TOPK | TOPK_SOFTMAX
    renormalize: bool  # SOFTMAX_TOPK: the top-k weights rescaled to sum to 1
    sparse_layers: tuple[int, ...]  # the others keep the dense MLP (intermediate_size)
    activation: str = "silu"  # "silu" | "swiglu_oai" (serving/kernels/moe_activation.py)
    swiglu_alpha: float = 1.702
    swiglu_limit: float = 7.0
    expert_bias: bool = False  # gate/up and down projections carry a bias per expert
    router_bias: bool = False
    # how the checkpoint stores the experts (serving/model/moe_weights.py): "split" (Qwen3-MoE:
    # gate rows then up rows, or one tensor per expert) | "interleaved_transposed" (gpt-oss)
    expert_layout: str = "split"

    def is_sparse(self, layer: int) -> bool:
        return layer in self.sparse_layers


def qwen3_moe_config(cfg: dict[str, Any], num_layers: int, source: str) -> MoEConfig | None:
    """None when the checkpoint has no experts (num_experts = 0: every layer dense)."""
    # transformers applies `sliding_window` only with `use_sliding_window` (off in the released
    # checkpoints)
    if cfg.get("use_sliding_window"):
        raise ModelLoadError(f"{source}: use_sliding_window=true is not supported for qwen3_moe")
    act = cfg.get("hidden_act", "silu")
    if act != "silu":
        raise ModelLoadError(f"{source}: hidden_act={act!r} is not supported (silu only)")
    num_experts = _int(cfg, "num_experts", _int(cfg, "num_local_experts", 0, source), source)
    if num_experts <= 0:
        return None
    top_k = _int(cfg, "num_experts_per_tok", 0, source)
    if not 1 <= top_k <= num_experts:
        raise ModelLoadError(
            f"{source}: num_experts_per_tok={top_k} must be in 1..num_experts={num_experts}"
        )
    step = _int(cfg, "decoder_sparse_step", 1, source)
    if step < 1:
        raise ModelLoadError(f"{source}: decoder_sparse_step={step} must be at least 1")
    listed = cfg.get("mlp_only_layers") or []
    if not isinstance(listed, list) or any(type(i) is not int for i in listed):
        raise ModelLoadError(f"{source}: mlp_only_layers={listed!r} must list layer indices")
    dense = set(listed)
    if any(not 0 <= i < num_layers for i in dense):
        raise ModelLoadError(
            f"{source}: mlp_only_layers={sorted(dense)} names layers outside 0..{num_layers - 1}"
        )
    inner = _int(cfg, "moe_intermediate_size", 0, source)
    if inner <= 0:
        raise ModelLoadError(f"{source}: moe_intermediate_size={inner} must be positive")
    sparse = tuple(i for i in range(num_layers) if i not in dense and (i + 1) % step == 0)
    return MoEConfig(
        num_experts=num_experts,
        top_k=top_k,
        intermediate_size=inner,
        router=SOFTMAX_TOPK,
        renormalize=bool(cfg.get("norm_topk_prob", False)),
        sparse_layers=sparse,
    )


def _int(cfg: dict[str, Any], key: str, default: int, source: str) -> int:
    """cfg[key] as an int (absent or null: `default`)."""
    value = cfg.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ModelLoadError(f"{source}: {key}={value!r} must be an integer")
    return value


def moe_config_from_hf(
    arch: str, cfg: dict[str, Any], num_layers: int, source: str
) -> MoEConfig | None:
    if arch == "qwen3_moe":
        return qwen3_moe_config(cfg, num_layers, source)
    return None  # gpt_oss: serving/loader/gpt_oss_config.py


def has_fused_experts(names: Iterable[str]) -> bool:
    """Whether a state dict holds the experts stacked (transformers' in-memory layout,
    `mlp.experts.gate_up_proj` [E, 2I, H] and `mlp.experts.down_proj` [E, H, I]) rather than one
    tensor per expert (the layout of Qwen3-MoE checkpoints on disk)."""
    return any(name.endswith("mlp.experts.gate_up_proj") for name in names)


def expert_tensor_names(moe: MoEConfig, layer: int, fused: bool = False) -> list[str]:
    """The HF names of one sparse layer's router and experts."""
    p = f"model.layers.{layer}.mlp."
    if moe.expert_layout != "split":  # gpt-oss
        experts = [f"experts.{x}{b}" for x in ("gate_up_proj", "down_proj") for b in ("", "_bias")]
        return [p + "router.weight", p + "router.bias"] + [p + x for x in experts]
    names = [p + "gate.weight"]
    if fused:
        return names + [p + "experts.gate_up_proj", p + "experts.down_proj"]
    for e in range(moe.num_experts):
        names += [f"{p}experts.{e}.{x}_proj.weight" for x in ("gate", "up", "down")]
    return names
