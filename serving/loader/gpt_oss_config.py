"""gpt-oss's config facts (HF transformers' GptOssConfig): every layer a mixture of experts
(router with a bias, top-k then softmax; experts with biases and the clamped SwiGLU), layers
alternating sliding-window and full attention by `layer_types`, a learned attention sink per
head, q/k/v/o projections with biases, YaRN rotary on every layer. Options this engine does not
implement are refused by name: a quantized checkpoint (`quantization_config`, e.g. the released
MXFP4 experts), rope types other than YaRN or none, YaRN options it does not know.
"""

from __future__ import annotations

from typing import Any

from serving.attention.layer_spec import LayerSpec, RopeSpec
from serving.loader.errors import ModelLoadError
from serving.loader.moe_config import TOPK_SOFTMAX, MoEConfig
from serving.loader.rope_scaling import frozen_scaling, normalize_rope_scaling

LAYER_TYPES = ("sliding_attention", "full_attention")
YARN_KEYS = {
    "rope_type",
    "type",
    "rope_theta",
    "factor",
    "beta_fast",
    "beta_slow",
    "original_max_position_embeddings",
    "truncate",
    "attention_factor",
}
EXPERT_LAYOUT = "interleaved_transposed"  # serving/model/moe_weights.py


def apply_gpt_oss_config(config: Any, cfg: dict[str, Any], source: str) -> None:
    """Fill a gpt-oss `ModelConfig`'s per-layer attention, rope and experts."""
    if cfg.get("quantization_config"):
        method = (cfg["quantization_config"] or {}).get("quant_method", "?")
        raise ModelLoadError(
            f"{source}: quantization_config (quant_method={method!r}) is not supported; serve "
            "a checkpoint with bf16/fp16/fp32 experts"
        )
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind not in ("default", "yarn"):
        raise ModelLoadError(f"{source}: gpt_oss rope_type={kind!r} is not supported (yarn)")
    unknown = sorted(set(rope) - YARN_KEYS)
    if unknown:
        raise ModelLoadError(f"{source}: rope_parameters options {unknown} are not supported")
    n = config.num_hidden_layers
    # HF's default: even layers sliding, odd layers full
    default = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    types = cfg.get("layer_types") or default
    if len(types) != n or any(t not in LAYER_TYPES for t in types):
        raise ModelLoadError(
            f"{source}: layer_types must list {n} entries of {LAYER_TYPES}, got {types!r}"
        )
    window = cfg.get("sliding_window")
    if "sliding_attention" in types and not (isinstance(window, int) and window >= 1):
        raise ModelLoadError(f"{source}: sliding layers need a sliding_window >= 1, got {window!r}")
    scaling = normalize_rope_scaling(rope)
    spec_rope = RopeSpec(config.rope_theta, None if scaling is None else frozen_scaling(scaling))
    config.layer_specs = [
        LayerSpec(
            num_heads=config.num_attention_heads,
            num_kv_heads=config.num_key_value_heads,
            head_dim=config.head_dim,
            scale=config.head_dim**-0.5,
            rope=spec_rope,
            sliding_window=window if kind_of == "sliding_attention" else None,
        )
        for kind_of in types
    ]
    config.attention_bias = bool(cfg.get("attention_bias", True))  # q/k/v and o
    config.attention_sinks = True
    config.qk_norm = False
    experts = cfg.get("num_local_experts")
    top_k = cfg.get("num_experts_per_tok")
    if not (isinstance(experts, int) and isinstance(top_k, int) and 1 <= top_k <= experts):
        raise ModelLoadError(
            f"{source}: num_experts_per_tok={top_k!r} must be in 1..num_local_experts={experts!r}"
        )
    config.moe = MoEConfig(
        num_experts=experts,
        top_k=top_k,
        intermediate_size=config.intermediate_size,
        router=TOPK_SOFTMAX,
        renormalize=False,
        sparse_layers=tuple(range(n)),
        activation="swiglu_oai",
        swiglu_alpha=float(cfg.get("swiglu_alpha", 1.702)),
        swiglu_limit=float(cfg.get("swiglu_limit", 7.0)),
        expert_bias=True,
        router_bias=True,
        expert_layout=EXPERT_LAYOUT,
    )
