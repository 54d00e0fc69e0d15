"""Tiny random-weight mixture-of-experts checkpoints written by transformers (`save_pretrained`:
config.json, safetensors, plus the byte-level tokenizer.json of engine_fixtures)."""

from __future__ import annotations

from pathlib import Path

import torch
from engine_fixtures import VOCAB, byte_tokenizer_json


def qwen3_moe_config(**overrides):
    """8 experts, top-2, renormalised; layers 0 and 2 sparse, layer 1 the dense MLP
    (mlp_only_layers). Weights of std 0.2: peaked logits and routing, so greedy argmax and the
    top-k choice have no numerical near-ties."""
    import transformers as tf

    fields = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        moe_intermediate_size=32,
        num_experts=8,
        num_experts_per_tok=2,
        norm_topk_prob=True,
        mlp_only_layers=[1],
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=1024,
        initializer_range=0.2,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    fields.update(overrides)
    return tf.Qwen3MoeConfig(**fields)


def gpt_oss_config(**overrides):
    """8 experts, top-2, 4 layers alternating sliding (window 8) and full attention, attention
    sinks, YaRN rotary, biases on the attention and the experts."""
    import transformers as tf

    fields = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=32,
        num_local_experts=8,
        num_experts_per_tok=2,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        sliding_window=8,
        max_position_embeddings=2048,  # = factor * original_max_position_embeddings
        rope_parameters={
            "rope_type": "yarn",
            "rope_theta": 150000.0,
            "factor": 32.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "original_max_position_embeddings": 64,
            "truncate": False,
        },
        initializer_range=0.2,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    fields.update(overrides)
    return tf.GptOssConfig(**fields)


def save_tiny_moe(path: Path, config, seed: int = 0):
    """Build the HF model for `config` with random weights (norms 1 + noise), save it and a
    tokenizer to `path`; return the HF model (eval mode)."""
    import transformers as tf

    torch.manual_seed(seed)
    model = tf.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            elif name.endswith("bias") or name.endswith("sinks"):
                p.copy_(0.3 * torch.randn_like(p))
    model.save_pretrained(str(path))
    byte_tokenizer_json(path)
    return model
