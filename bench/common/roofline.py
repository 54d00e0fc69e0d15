"""Bytes a decode step moves (weights, experts read, KV cache) and the memory bandwidth the
benches' roofline figures divide by, for the HF config dicts of vigil/devtools/model_shapes.py."""

from __future__ import annotations

HBM_BYTES_PER_S = 4.8e12  # H200 datasheet


def _layer_specs(cfg: dict):
    from serving.loader.config import config_from_hf

    return config_from_hf(dict(cfg), {}, "shape").layers()


def _experts(cfg: dict) -> tuple[int, int] | None:
    """(experts, each expert's intermediate size) of a mixture of experts (Qwen3-MoE's or
    gpt-oss's names), None for a dense model."""
    if cfg.get("num_experts"):
        return cfg["num_experts"], cfg["moe_intermediate_size"]
    if cfg.get("num_local_experts"):
        return cfg["num_local_experts"], cfg["intermediate_size"]
    return None


def experts_read(cfg: dict, batch: int) -> float:
    """Experts a decode step of `batch` tokens reads per sparse layer, expected under uniform
    routing: each expert is missed by all `batch` tokens with probability (1 - k/E)^batch."""
    e, k = _experts(cfg)[0], cfg["num_experts_per_tok"]  # type: ignore[index]
    return e * (1.0 - (1.0 - k / e) ** batch)


def _mlp_elems(cfg: dict, batch: int) -> float:
    """Per layer: the dense MLP, or the router plus the experts the batch routes to."""
    h, moe = cfg["hidden_size"], _experts(cfg)
    if moe is None:
        return 3 * h * cfg["intermediate_size"]
    return moe[0] * h + experts_read(cfg, batch) * 3 * h * moe[1]


def weight_bytes(cfg: dict, elem: int = 2, batch: int = 1) -> int:
    """Bytes of weights one decode step of `batch` tokens reads (tied embeddings read once, as the
    lm_head; a mixture of experts' layers read the router and the experts the batch routes to)."""
    h, layers = cfg["hidden_size"], cfg["num_hidden_layers"]
    if "layer_types" in cfg:  # per-layer geometry: k = v on full layers when k_eq_v (Gemma 4)
        gemma = cfg["model_type"].startswith("gemma")  # 4 norms a layer; gpt-oss 2 and experts
        total = 0.0
        for spec in _layer_specs(cfg):
            q, kv = spec.num_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim
            kv_mats = 1 if cfg.get("attention_k_eq_v") and spec.sliding_window is None else 2
            total += (
                h * (q + kv_mats * kv) + q * h + _mlp_elems(cfg, batch) + (4 if gemma else 2) * h
            )
        lm_head = cfg["vocab_size"] * h * (1 if cfg.get("tie_word_embeddings", True) else 2)
        return int(elem * (total + lm_head + h))
    q = cfg["num_attention_heads"] * cfg["head_dim"]
    kv = cfg["num_key_value_heads"] * cfg["head_dim"]
    mlp = _mlp_elems(cfg, batch)
    per_layer = h * (q + 2 * kv) + q * h + mlp + 2 * h
    if cfg["model_type"] in ("qwen3", "qwen3_moe"):
        per_layer += 2 * cfg["head_dim"]
    lm_head = cfg["vocab_size"] * h * (1 if cfg["tie_word_embeddings"] else 2)
    return int(elem * (layers * per_layer + lm_head + h))


def kv_bytes_per_token(cfg: dict, elem: int = 2) -> int:
    if "layer_types" in cfg:
        return sum(elem * 2 * s.num_kv_heads * s.head_dim for s in _layer_specs(cfg))
    return elem * 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * cfg["head_dim"]


def decode_step_bytes(cfg: dict, batch: int, mean_context: float, kv_elem: int = 2) -> float:
    """Roofline bytes of one decode step: every weight once plus every sequence's KV (a sliding
    layer reads at most its window)."""
    if "layer_types" in cfg:
        kv = sum(
            kv_elem
            * 2
            * s.num_kv_heads
            * s.head_dim
            * min(mean_context, s.sliding_window or mean_context)
            for s in _layer_specs(cfg)
        )
        return weight_bytes(cfg, batch=batch) + batch * kv
    return weight_bytes(cfg, batch=batch) + batch * mean_context * kv_bytes_per_token(cfg, kv_elem)
