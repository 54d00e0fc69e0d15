"""rope_inv_freq against transformers' own rotary embedding, and config parsing of rope settings."""

from __future__ import annotations

import pytest
import torch

from serving.loader import ModelConfig, ModelLoadError, rope_inv_freq
from serving.loader.config import config_from_hf

LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


def _config(**kw) -> ModelConfig:
    base = dict(
        arch="llama",
        vocab_size=10,
        hidden_size=512,
        intermediate_size=8,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=128,
        rms_norm_eps=1e-5,
        rope_theta=500000.0,
        rope_scaling=None,
        max_position_embeddings=131072,
        tie_word_embeddings=False,
        attention_bias=False,
        qk_norm=False,
        bos_token_id=None,
    )
    base.update(kw)
    return ModelConfig(**base)


@pytest.mark.parametrize("scaling", [None, {"rope_type": "linear", "factor": 4.0}, LLAMA3])
def test_inv_freq_matches_transformers(scaling):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    params = (
        {"rope_type": "default", "rope_theta": 500000.0}
        if scaling is None
        else {**scaling, "rope_theta": 500000.0}
    )
    hf_cfg = LlamaConfig(
        hidden_size=512,
        num_attention_heads=4,
        max_position_embeddings=131072,
        rope_parameters=params,
    )
    expected = LlamaRotaryEmbedding(hf_cfg).inv_freq
    ours_cfg = config_from_hf({**hf_cfg.to_dict(), "model_type": "llama"}, {}, "test")
    assert ours_cfg.rope_scaling == (None if scaling is None else scaling)
    got = rope_inv_freq(ours_cfg)
    assert got.dtype == torch.float32 and got.shape == (64,)
    assert torch.equal(got, expected)


def test_v4_style_rope_keys():
    cfg = {
        "model_type": "llama",
        "vocab_size": 10,
        "hidden_size": 64,
        "intermediate_size": 8,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "rope_theta": 1234.0,
        "rope_scaling": {"type": "linear", "factor": 2.0},
    }
    c = config_from_hf(cfg, {}, "test")
    assert c.rope_theta == 1234.0 and c.rope_scaling == {"rope_type": "linear", "factor": 2.0}
    assert c.num_key_value_heads == 4 and c.head_dim == 16
    base = 1.0 / (1234.0 ** (torch.arange(0, 16, 2).double() / 16))
    assert torch.allclose(rope_inv_freq(c).double(), base / 2.0, rtol=1e-6)


def test_freq_factors_divide():
    factors = [1.0, 2.0, 4.0, 8.0]
    c = _config(
        head_dim=8,
        rope_theta=10000.0,
        rope_scaling={"rope_type": "freq_factors", "factors": factors},
    )
    plain = rope_inv_freq(_config(head_dim=8, rope_theta=10000.0))
    assert torch.equal(rope_inv_freq(c), plain / torch.tensor(factors))


def test_unsupported_rope_type_is_named():
    cfg = {
        "model_type": "qwen2",
        "vocab_size": 10,
        "hidden_size": 64,
        "intermediate_size": 8,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "rope_parameters": {"rope_type": "longrope", "factor": 4.0, "rope_theta": 1e6},
    }
    with pytest.raises(ModelLoadError, match="unsupported rope scaling type 'longrope'"):
        config_from_hf(cfg, {}, "test")
    cfg["rope_parameters"]["rope_type"] = "yarn"
    with pytest.raises(ModelLoadError, match="yarn rope scaling lacks original_max_position"):
        config_from_hf(cfg, {}, "test")


def test_missing_key_is_named():
    with pytest.raises(ModelLoadError, match="lacks required key 'hidden_size'"):
        config_from_hf({"model_type": "llama", "num_attention_heads": 2}, {}, "test")
