"""`ModelConfig`: the architecture facts the model code needs, from HF config.json or GGUF
metadata."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from serving.attention.layer_spec import LayerSpec, RopeSpec
from serving.loader.archs import GEMMA_ARCHS, LLAMA_ARCHS, SUPPORTED_ARCHS
from serving.loader.errors import ModelLoadError
from serving.loader.families import apply_gemma_config, refuse_unsupported, window_of
from serving.loader.gpt_oss_config import apply_gpt_oss_config
from serving.loader.moe_config import MoEConfig, moe_config_from_hf
from serving.loader.rope_scaling import frozen_scaling, normalize_rope_scaling

__all__ = ["GEMMA_ARCHS", "LLAMA_ARCHS", "SUPPORTED_ARCHS", "ModelConfig", "config_from_hf"]

MAX_HEAD_DIM = 512
YARN_REQUIRED = ("factor", "original_max_position_embeddings")
SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3", "freq_factors", "proportional", "yarn")


@dataclass
class ModelConfig:
    arch: str  # one of SUPPORTED_ARCHS
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    # None: plain RoPE. Otherwise {"rope_type": "linear"|"llama3"|"freq_factors", ...}; see rope.py
    rope_scaling: dict[str, Any] | None
    max_position_embeddings: int
    tie_word_embeddings: bool
    attention_bias: bool  # q/k/v projections carry a bias (Qwen2)
    qk_norm: bool  # per-head RMSNorm on q and k before RoPE (Qwen3)
    bos_token_id: int | None
    eos_token_ids: list[int] = field(default_factory=list)
    moe: MoEConfig | None = None  # mixture of experts (serving/loader/moe_config.py)
    attention_sinks: bool = False  # gpt-oss: a learned sink logit per head in every softmax
    # per-layer attention geometry; None: every layer as the fields above say (uniform_layers)
    layer_specs: list[LayerSpec] | None = None
    sliding_window: int | None = None  # Mistral: every layer (None: full attention)
    final_logit_softcap: float | None = None  # logits -> cap * tanh(logits / cap) (Gemma)
    hidden_activation: str = "silu"  # the MLP gate's activation: "silu" | "gelu_pytorch_tanh"
    # Gemma 4: per-layer input embeddings (0: none), their vocabulary; full layers whose value
    # projection is the key projection's output (attention_k_eq_v)
    per_layer_input_size: int = 0
    per_layer_vocab_size: int = 0
    k_eq_v: bool = False
    double_wide_mlp_layers: tuple[int, ...] = ()  # Gemma 4: KV-sharing layers with 2x MLP

    def layers(self) -> list[LayerSpec]:
        """Each decoder layer's attention geometry."""
        if self.layer_specs is not None:
            return self.layer_specs
        scaling = None if self.rope_scaling is None else frozen_scaling(self.rope_scaling)
        spec = LayerSpec(
            num_heads=self.num_attention_heads,
            num_kv_heads=self.num_key_value_heads,
            head_dim=self.head_dim,
            scale=self.head_dim**-0.5,
            rope=RopeSpec(self.rope_theta, scaling),
            sliding_window=self.sliding_window,
        )
        return [spec] * self.num_hidden_layers

    def validate(self, source: str) -> None:
        if self.arch not in SUPPORTED_ARCHS:
            raise ModelLoadError(
                f"{source}: unsupported architecture {self.arch!r} (supported: "
                f"{', '.join(SUPPORTED_ARCHS)})"
            )
        if self.num_attention_heads % self.num_key_value_heads:
            raise ModelLoadError(
                f"{source}: num_attention_heads={self.num_attention_heads} is not a multiple of "
                f"num_key_value_heads={self.num_key_value_heads}"
            )
        for i, spec in enumerate(self.layers()):
            where = f"{source}: layer {i}"
            if spec.num_heads % spec.num_kv_heads:
                raise ModelLoadError(
                    f"{where}: {spec.num_heads} attention heads are not a multiple of "
                    f"{spec.num_kv_heads} KV heads"
                )
            if spec.head_dim % 2 or spec.head_dim > MAX_HEAD_DIM:
                raise ModelLoadError(
                    f"{where}: head_dim={spec.head_dim} must be even (RoPE) and at most "
                    f"{MAX_HEAD_DIM} (the attention kernels)"
                )
            if spec.sliding_window is not None and spec.sliding_window < 1:
                raise ModelLoadError(f"{where}: sliding_window={spec.sliding_window} < 1")
            kind = (spec.rope.scaling_dict or {}).get("rope_type")
            if kind is not None and kind not in SUPPORTED_ROPE_TYPES:
                raise ModelLoadError(
                    f"{where}: unsupported rope scaling type {kind!r} "
                    f"(supported: {', '.join(SUPPORTED_ROPE_TYPES)})"
                )
            given = spec.rope.scaling_dict or {}
            lacking = [k for k in YARN_REQUIRED if kind == "yarn" and k not in given]
            if lacking:
                raise ModelLoadError(f"{where}: yarn rope scaling lacks {', '.join(lacking)}")


def _eos_list(*values: Any) -> list[int]:
    out: list[int] = []
    for value in values:
        items = value if isinstance(value, list) else [value]
        for item in items:
            if item is not None and int(item) not in out:
                out.append(int(item))
    return out


def config_from_hf(cfg: dict[str, Any], generation_cfg: dict[str, Any], source: str) -> ModelConfig:
    """Build from a parsed config.json (+ generation_config.json, whose eos list wins over
    config's)."""
    refuse_unsupported(cfg, source)
    arch: str = cfg["model_type"]  # refuse_unsupported: one of SUPPORTED_ARCHS
    if cfg.get("mlp_bias"):
        raise ModelLoadError(f"{source}: mlp_bias=true is not supported")
    try:
        rope = cfg.get("rope_parameters") or {}
        heads = int(cfg["num_attention_heads"])
        hidden = int(cfg["hidden_size"])
        config = ModelConfig(
            arch=arch,
            vocab_size=int(cfg["vocab_size"]),
            hidden_size=hidden,
            intermediate_size=int(cfg["intermediate_size"]),
            num_hidden_layers=int(cfg["num_hidden_layers"]),
            num_attention_heads=heads,
            num_key_value_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=int(cfg.get("head_dim") or hidden // heads),
            rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
            rope_theta=float(rope.get("rope_theta", cfg.get("rope_theta", 10000.0))),
            rope_scaling=normalize_rope_scaling(cfg.get("rope_scaling") or rope),
            max_position_embeddings=int(cfg.get("max_position_embeddings", 2048)),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            # Qwen2 always has qkv bias (its config has no flag); Llama/Qwen3 say so in
            # attention_bias
            attention_bias=True if arch == "qwen2" else bool(cfg.get("attention_bias", False)),
            qk_norm=arch in ("qwen3", "qwen3_moe"),
            bos_token_id=cfg.get("bos_token_id"),
            eos_token_ids=_eos_list(generation_cfg.get("eos_token_id"), cfg.get("eos_token_id")),
            sliding_window=window_of(cfg) if arch == "mistral" else None,
        )
        config.moe = moe_config_from_hf(arch, cfg, config.num_hidden_layers, source)
        if arch in GEMMA_ARCHS:
            apply_gemma_config(config, cfg, source)
        if arch == "gpt_oss":
            apply_gpt_oss_config(config, cfg, source)
    except KeyError as exc:
        raise ModelLoadError(f"{source}: config.json lacks required key {exc.args[0]!r}") from exc
    config.validate(source)
    return config
