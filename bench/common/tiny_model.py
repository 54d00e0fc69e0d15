"""A tiny random Llama directory (2 layers, hidden 64, a 256-token byte-level tokenizer) for CPU
serving runs whose cost is the API path, not the model: `bench_serving --tiny-model DIR`."""

from __future__ import annotations

import json
from pathlib import Path

TINY = {
    "model_type": "llama",
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 1024,
    "tie_word_embeddings": True,
    "rope_theta": 10000.0,
}


def write_tiny_model(out: Path) -> Path:
    """Write (once) the tiny model and its tokenizer to `out`; returns `out`."""
    marker = out / "vigil_tiny_model.json"
    if marker.is_file() and json.loads(marker.read_text()) == TINY:
        return out
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import AutoConfig, AutoModelForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    kw = {k: v for k, v in TINY.items() if k != "model_type"}
    config = AutoConfig.for_model(
        "llama",
        initializer_range=0.2,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        **kw,
    )
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).eval().save_pretrained(str(out))
    # every byte one token: any id sampled has text, so every token is one stream event
    tokenizer = Tokenizer(
        models.BPE(vocab={ch: i for i, ch in enumerate(sorted(ByteLevel.alphabet()))}, merges=[])
    )
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.save(str(out / "tokenizer.json"))
    marker.write_text(json.dumps(TINY))
    return out


def tiny_qwen3(vocab_size: int = 256, max_positions: int = 1024, **extra: object) -> dict:
    """A Qwen3-like shape small enough for CPU tests (head_dim set, q/k norms, no bias)."""
    return {
        **TINY,
        "model_type": "qwen3",
        "vocab_size": vocab_size,
        "head_dim": 16,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "max_position_embeddings": max_positions,
        "hidden_act": "silu",
        "attention_bias": False,
        **extra,
    }
