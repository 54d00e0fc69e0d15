"""Real HF configs (as dicts) of the model shapes that benches and GPU tests fill with random
weights.

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
