"""Config facts of the families beyond the Llama shape: Mistral's sliding window, Gemma 3's and
Gemma 4's per-layer attention (sliding and full layers by `layer_types`, a rope base per layer
type, Gemma 4's full layers with their own head_dim, KV heads and partial rotary), and what is
refused at load, each refusal naming the option.
"""

from __future__ import annotations

from typing import Any

from serving.attention.layer_spec import LayerSpec, RopeSpec
from serving.loader.archs import SUPPORTED_ARCHS
from serving.loader.errors import ModelLoadError
from serving.loader.rope_scaling import frozen_scaling, normalize_rope_scaling

# model_type -> why it is refused (the text-only model_type serves the same language model)
REFUSED_MODEL_TYPES = {
    "gemma3": "Gemma 3's vision tower is not supported; serve a text-only checkpoint "
    "(model_type gemma3_text)",
    "gemma4": "Gemma 4's audio and vision towers are not supported; serve a text-only "
    "checkpoint (model_type gemma4_text)",
}
LAYER_TYPES = ("sliding_attention", "full_attention")
GELU_TANH = ("gelu_pytorch_tanh", "gelu_tanh")


def refuse_unsupported(cfg: dict[str, Any], source: str) -> None:
    arch = cfg.get("model_type")
    if arch in REFUSED_MODEL_TYPES:
        raise ModelLoadError(f"{source}: model_type={arch!r}: {REFUSED_MODEL_TYPES[arch]}")
    if arch not in SUPPORTED_ARCHS:
        raise ModelLoadError(
            f"{source}: unsupported architecture model_type={arch!r} "
            f"(supported: {', '.join(SUPPORTED_ARCHS)})"
        )
    refusals = {
        "use_bidirectional_attention": "bidirectional attention (an encoder use) is not supported",
        "enable_moe_block": "Gemma 4's mixture-of-experts block is not supported",
        "use_sliding_window": None,  # Qwen2's flag: checked below
    }
    for key, why in refusals.items():
        if why is not None and cfg.get(key):
            raise ModelLoadError(f"{source}: {key}={cfg[key]!r}: {why}")
    if arch in ("qwen2", "qwen3") and cfg.get("use_sliding_window"):
        raise ModelLoadError(f"{source}: use_sliding_window=true is not supported for {arch}")
    if cfg.get("attn_logit_softcapping") is not None:
        # transformers' Gemma 3 keeps the value but never applies it: serving it either way
        # would disagree with one reading of the checkpoint
        raise ModelLoadError(
            f"{source}: attn_logit_softcapping={cfg['attn_logit_softcapping']!r} is refused: "
            f"the reference {arch} implementation does not apply it"
        )


def window_of(cfg: dict[str, Any]) -> int | None:
    value = cfg.get("sliding_window")
    return None if value is None else int(value)


def _rope_for(cfg: dict[str, Any], layer_type: str, source: str) -> RopeSpec:
    params = (cfg.get("rope_parameters") or {}).get(layer_type)
    if params is None:
        raise ModelLoadError(f"{source}: rope_parameters has no entry for {layer_type!r}")
    scaling = normalize_rope_scaling(params)
    return RopeSpec(
        float(params.get("rope_theta", 10000.0)),
        None if scaling is None else frozen_scaling(scaling),
    )


def _layer_types(cfg: dict[str, Any], n: int, source: str) -> list[str]:
    types = cfg.get("layer_types")
    if types is None:  # the older spelling: every `pattern`-th layer is full
        pattern = int(cfg.get("sliding_window_pattern", 6))
        types = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n)]
    if len(types) != n or any(t not in LAYER_TYPES for t in types):
        raise ModelLoadError(
            f"{source}: layer_types must list {n} entries of {LAYER_TYPES}, got {types!r}"
        )
    return list(types)


def apply_gemma_config(config: Any, cfg: dict[str, Any], source: str) -> None:
    """Fill a Gemma 3 / Gemma 4 text `ModelConfig`'s per-layer geometry and family facts."""
    act = cfg.get("hidden_activation") or cfg.get("hidden_act") or "gelu_pytorch_tanh"
    if act not in GELU_TANH:
        raise ModelLoadError(f"{source}: hidden_activation={act!r} is not supported")
    config.hidden_activation = "gelu_pytorch_tanh"
    if cfg.get("attention_bias"):
        raise ModelLoadError(f"{source}: attention_bias=true is not supported for Gemma")
    config.tie_word_embeddings = bool(cfg.get("tie_word_embeddings", True))
    config.final_logit_softcap = _float_or_none(cfg.get("final_logit_softcapping"))
    config.qk_norm = True
    n = config.num_hidden_layers
    types = _layer_types(cfg, n, source)
    window = int(cfg.get("sliding_window") or 0) or None
    if window is None and "sliding_attention" in types:
        raise ModelLoadError(f"{source}: sliding layers without a sliding_window")
    ropes = {t: _rope_for(cfg, t, source) for t in set(types)}
    if config.arch == "gemma3_text":
        scale = float(cfg.get("query_pre_attn_scalar", 256)) ** -0.5
        softcap = None
        overrides: dict[int, dict[str, Any]] = {}
    else:
        scale, softcap = 1.0, None
        overrides = _gemma4_overrides(config, cfg, source)
    specs = []
    for i, kind in enumerate(types):
        extra = overrides.get(i, {})
        head_dim = int(extra.get("head_dim", config.head_dim))
        specs.append(
            LayerSpec(
                num_heads=config.num_attention_heads,
                num_kv_heads=int(extra.get("num_key_value_heads", config.num_key_value_heads)),
                head_dim=head_dim,
                scale=scale,
                rope=ropes[kind],
                sliding_window=window if kind == "sliding_attention" else None,
                softcap=softcap,
                kv_source=extra.get("kv_source"),
            )
        )
    config.layer_specs = specs


def _gemma4_overrides(config: Any, cfg: dict[str, Any], source: str) -> dict[int, dict[str, Any]]:
    config.per_layer_input_size = int(cfg.get("hidden_size_per_layer_input") or 0)
    config.per_layer_vocab_size = int(cfg.get("vocab_size_per_layer_input") or config.vocab_size)
    config.k_eq_v = bool(cfg.get("attention_k_eq_v", False))
    overrides: dict[int, dict[str, Any]] = {}
    for key, values in (cfg.get("per_layer_config") or {}).items():
        unknown = set(values) - {"head_dim", "num_key_value_heads"}
        if unknown:
            raise ModelLoadError(
                f"{source}: per_layer_config[{key}] sets {sorted(unknown)}, not supported"
            )
        overrides[int(key)] = dict(values)
    n = config.num_hidden_layers
    shared = int(cfg.get("num_kv_shared_layers") or 0)
    if shared:
        types = _layer_types(cfg, n, source)
        first = n - shared
        if first < 1:
            raise ModelLoadError(f"{source}: num_kv_shared_layers={shared} leaves no KV layer")
        for i in range(first, n):
            producers = [j for j in range(first) if types[j] == types[i]]
            if not producers:
                raise ModelLoadError(f"{source}: layer {i} shares KV with no {types[i]} layer")
            overrides.setdefault(i, {})["kv_source"] = producers[-1]
        if cfg.get("use_double_wide_mlp"):
            config.double_wide_mlp_layers = tuple(range(first, n))
    return overrides


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)
