"""Real HF configs (as dicts) of the benchmarked model shapes; weights are random in the benches.

Written out here because the device machine has no hub access and the real weight files do not
travel; the numbers are those of the models' published config.json files.
"""

from __future__ import annotations

SMOLLM2_135M = {
    "model_type": "llama",
    "vocab_size": 49152,
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "head_dim": 64,
    "rms_norm_eps": 1e-5,
    "rope_theta": 100000.0,
    "max_position_embeddings": 8192,
    "tie_word_embeddings": True,
    "hidden_act": "silu",
    "attention_bias": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
QWEN3_0_6B = {
    "model_type": "qwen3",
    "vocab_size": 151936,
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "max_position_embeddings": 40960,
    "tie_word_embeddings": True,
    "hidden_act": "silu",
    "attention_bias": False,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
}
QWEN3_4B = {
    "model_type": "qwen3",
    "vocab_size": 151936,
    "hidden_size": 2560,
    "intermediate_size": 9728,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "max_position_embeddings": 40960,
    "tie_word_embeddings": True,
    "hidden_act": "silu",
    "attention_bias": False,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
}
# 65 GB of bf16 weights: benchmarked under tensor parallelism (each rank makes its own shard)
QWEN3_32B = {
    "model_type": "qwen3",
    "vocab_size": 151936,
    "hidden_size": 5120,
    "intermediate_size": 25600,
    "num_hidden_layers": 64,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "max_position_embeddings": 40960,
    "tie_word_embeddings": False,
    "hidden_act": "silu",
    "attention_bias": False,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
}
# Gemma-4-12B-like (the geometry the engine must get right, not a published config): sliding layers
# 256 wide with 8 KV heads, every 6th layer full, 512 wide with one KV head shared by k and v,
# a quarter of its head rotated; window 1024
_G4_LAYERS = 48
GEMMA4_12B_LIKE = {
    "model_type": "gemma4_text",
    "vocab_size": 262144,
    "hidden_size": 3840,
    "intermediate_size": 15360,
    "num_hidden_layers": _G4_LAYERS,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 256,
    "rms_norm_eps": 1e-6,
    "sliding_window": 1024,
    "layer_types": [
        "full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(_G4_LAYERS)
    ],
    "per_layer_config": {
        str(i): {"head_dim": 512, "num_key_value_heads": 1}
        for i in range(_G4_LAYERS)
        if (i + 1) % 6 == 0
    },
    "attention_k_eq_v": True,
    "hidden_size_per_layer_input": 0,
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {
            "rope_type": "proportional",
            "partial_rotary_factor": 0.25,
            "rope_theta": 1000000.0,
        },
    },
    "max_position_embeddings": 131072,
    "tie_word_embeddings": True,
    "hidden_activation": "gelu_pytorch_tanh",
    "final_logit_softcapping": 30.0,
    "bos_token_id": 2,
    "eos_token_id": 1,
}
# mixture of experts: 128 experts of which a token takes 8; 61 GB of bf16 weights, ~3.3 B read per
# token (attention, the router and 8 experts per layer)
QWEN3_30B_A3B = {
    "model_type": "qwen3_moe",
    "vocab_size": 151936,
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "norm_topk_prob": True,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "num_hidden_layers": 48,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "max_position_embeddings": 40960,
    "tie_word_embeddings": False,
    "hidden_act": "silu",
    "attention_bias": False,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
}
# gpt-oss-20b's published config with bf16 experts instead of its MXFP4 ones (the engine refuses
# quantized checkpoints): 32 experts of which a token takes 4, layers alternating a 128-token
# window and full attention, attention sinks, biases; ~42 GB of bf16 weights
_GO_LAYERS = 24
GPT_OSS_20B_LIKE = {
    "model_type": "gpt_oss",
    "vocab_size": 201088,
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "num_local_experts": 32,
    "num_experts_per_tok": 4,
    "num_hidden_layers": _GO_LAYERS,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "sliding_window": 128,
    "layer_types": [
        "sliding_attention" if i % 2 == 0 else "full_attention" for i in range(_GO_LAYERS)
    ],
    "attention_bias": True,
    "rms_norm_eps": 1e-5,
    "rope_parameters": {
        "rope_type": "yarn",
        "rope_theta": 150000.0,
        "factor": 32.0,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "original_max_position_embeddings": 4096,
        "truncate": False,
    },
    "swiglu_limit": 7.0,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
    "bos_token_id": 199998,
    "eos_token_id": 200002,
    "pad_token_id": 199999,
}
SHAPES = {
    "smollm2-135m": SMOLLM2_135M,
    "gemma4-12b-like": GEMMA4_12B_LIKE,
    "qwen3-0.6b": QWEN3_0_6B,
    "qwen3-4b": QWEN3_4B,
    "qwen3-32b": QWEN3_32B,
    "qwen3-30b-a3b": QWEN3_30B_A3B,
    "gpt-oss-20b-like": GPT_OSS_20B_LIKE,
}

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
