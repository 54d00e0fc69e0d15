"""HF-directory loading: tiny random Llama/Qwen2/Qwen3 models saved by transformers
(save_pretrained: config.json + model.safetensors) load back to the very same tensors; errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from serving.loader import ModelLoadError, load_model_files

torch.set_num_threads(1)


def save_tiny(path: Path, arch: str, vocab: dict, tied: bool, write_tokenizer, **extra):
    from transformers import (
        GenerationConfig,
        LlamaConfig,
        LlamaForCausalLM,
        Qwen2Config,
        Qwen2ForCausalLM,
        Qwen3Config,
        Qwen3ForCausalLM,
    )

    kw = dict(
        vocab_size=len(vocab["tokens"]),
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=tied,
        eos_token_id=vocab["eos_id"],
        **extra,
    )
    cls = {
        "llama": (LlamaConfig, LlamaForCausalLM),
        "qwen2": (Qwen2Config, Qwen2ForCausalLM),
        "qwen3": (Qwen3Config, Qwen3ForCausalLM),
    }[arch]
    torch.manual_seed(1)
    model = cls[1](cls[0](**kw)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith(".bias"):
                p.copy_(torch.randn_like(p))
    model.save_pretrained(path)
    GenerationConfig(eos_token_id=[vocab["eos_id"], 0]).save_pretrained(path)
    write_tokenizer(path)
    return model


@pytest.mark.parametrize(
    "arch,tied,extra",
    [
        ("qwen2", True, {}),
        ("qwen3", False, {"head_dim": 24}),
        (
            "llama",
            False,
            {
                "rope_parameters": {
                    "rope_type": "llama3",
                    "rope_theta": 50000.0,
                    "factor": 8.0,
                    "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 128,
                }
            },
        ),
    ],
)
def test_hf_dir_loads_same_tensors(tmp_path, tiny_vocab, write_tiny_tokenizer, arch, tied, extra):
    model = save_tiny(tmp_path, arch, tiny_vocab, tied, write_tiny_tokenizer, **extra)
    loaded = load_model_files(tmp_path)
    ref = {k: v for k, v in model.state_dict().items() if not (tied and k == "lm_head.weight")}
    assert set(loaded.state_dict) == set(ref)
    for name, tensor in loaded.state_dict.items():
        assert tensor.dtype == torch.float32
        assert torch.equal(tensor, ref[name]), name
    c = loaded.config
    assert c.arch == arch and c.tie_word_embeddings == tied
    assert c.attention_bias == (arch == "qwen2")  # Qwen2 has q/k/v biases, Qwen3 q/k norms
    assert c.qk_norm == (arch == "qwen3")
    assert any(k.endswith("q_proj.bias") for k in ref) == c.attention_bias
    assert any(k.endswith("q_norm.weight") for k in ref) == c.qk_norm
    assert c.head_dim == (getattr(model.config, "head_dim", None) or 16)
    assert c.rms_norm_eps == model.config.rms_norm_eps
    assert c.rope_theta == model.config.rope_parameters["rope_theta"]
    assert c.eos_token_ids == [tiny_vocab["eos_id"], 0]  # generation_config's list first
    assert loaded.tokenizer.eos_token_ids == {tiny_vocab["eos_id"], 0}
    if arch == "llama":
        assert c.rope_scaling["rope_type"] == "llama3" and c.rope_scaling["factor"] == 8.0
    else:
        assert c.rope_scaling is None
    text = loaded.tokenizer.apply_chat_template([{"role": "user", "content": "the cat"}])
    assert text == "<|im_start|>user\nthe cat<|im_end|>\n<|im_start|>assistant\n"


def test_unsupported_architecture_config(tmp_path, tiny_vocab, write_tiny_tokenizer):
    save_tiny(tmp_path, "qwen2", tiny_vocab, True, write_tiny_tokenizer)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["model_type"] = "gpt_neox"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelLoadError, match="unsupported architecture model_type='gpt_neox'"):
        load_model_files(tmp_path)


def test_missing_pieces(tmp_path, tiny_vocab, write_tiny_tokenizer):
    save_tiny(tmp_path, "qwen2", tiny_vocab, True, write_tiny_tokenizer)
    (tmp_path / "tokenizer.json").unlink()
    with pytest.raises(ModelLoadError, match="missing tokenizer.json"):
        load_model_files(tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:5000])
    with pytest.raises(ModelLoadError, match="model.safetensors: unreadable safetensors"):
        load_model_files(tmp_path)
    weights.unlink()
    with pytest.raises(ModelLoadError, match="no \\*.safetensors"):
        load_model_files(tmp_path)
    (tmp_path / "config.json").unlink()
    with pytest.raises(ModelLoadError, match="missing config.json"):
        load_model_files(tmp_path)


def test_missing_tensor_is_named(tmp_path, tiny_vocab, write_tiny_tokenizer):
    from safetensors.torch import load_file, save_file

    save_tiny(tmp_path, "qwen3", tiny_vocab, False, write_tiny_tokenizer)
    state = load_file(str(tmp_path / "model.safetensors"))
    del state["model.layers.1.self_attn.k_norm.weight"]
    save_file(state, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(
        ModelLoadError, match="missing tensors \\['model.layers.1.self_attn.k_norm.weight'\\]"
    ):
        load_model_files(tmp_path)
