"""GGUF loading: the shipped SmolLM2 against HF transformers' own GGUF loader, tiny GGUF files we
write with gguf.GGUFWriter (names from gguf's own HF->GGUF name map, Q/K permuted as llama.cpp's
converter does), dequantization against gguf.quants, and the error cases."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize as gguf_dequantize
from gguf.quants import quantize as gguf_quantize

from serving.loader import ModelLoadError, load_model_files
from serving.loader.dequant import dequantize

torch.set_num_threads(1)

ARCHS = {
    "llama": gguf.MODEL_ARCH.LLAMA,
    "qwen2": gguf.MODEL_ARCH.QWEN2,
    "qwen3": gguf.MODEL_ARCH.QWEN3,
}


# ---- SmolLM2 vs transformers ---------------------------------------------------------------


def test_smollm2_state_dict_equals_transformers(smollm2_loaded, hf_smollm2):
    ours = smollm2_loaded.state_dict
    ref = hf_smollm2.state_dict()
    assert smollm2_loaded.config.tie_word_embeddings
    # HF lists the tied lm_head too; it is the embedding itself
    assert set(ref) - set(ours) == {"lm_head.weight"}
    assert torch.equal(ref["lm_head.weight"], ours["model.embed_tokens.weight"])
    for name, tensor in ours.items():
        assert tensor.dtype == torch.float32 and tensor.device.type == "cpu", name
        assert torch.equal(tensor, ref[name]), name  # same dequantization: bit-identical


def test_smollm2_config_matches_transformers(smollm2_loaded, hf_smollm2):
    c, h = smollm2_loaded.config, hf_smollm2.config
    assert c.arch == "llama"
    assert (c.vocab_size, c.hidden_size, c.intermediate_size) == (
        h.vocab_size,
        h.hidden_size,
        h.intermediate_size,
    )
    assert (c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads) == (
        h.num_hidden_layers,
        h.num_attention_heads,
        h.num_key_value_heads,
    )
    assert c.head_dim == h.hidden_size // h.num_attention_heads
    assert c.rms_norm_eps == pytest.approx(h.rms_norm_eps)
    assert c.rope_theta == pytest.approx(h.rope_parameters["rope_theta"])
    assert c.max_position_embeddings == h.max_position_embeddings
    assert c.rope_scaling is None and not c.attention_bias and not c.qk_norm
    assert c.bos_token_id == 1 and c.eos_token_ids == [2]
    assert smollm2_loaded.tokenizer.eos_token_ids == {2}


def test_default_path_is_smollm2(smollm2_path):
    assert smollm2_path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"


# ---- dequantization against gguf.quants -------------------------------------------------------


@pytest.mark.parametrize("qtype", [Q.Q4_0, Q.Q4_1, Q.Q8_0, Q.F16, Q.BF16, Q.F32])
def test_dequantize_matches_gguf(qtype):
    w = np.random.default_rng(int(qtype)).standard_normal((24, 96)).astype(np.float32) * 3
    data = w if qtype == Q.F32 else gguf_quantize(w, qtype)
    expected = torch.from_numpy(gguf_dequantize(data, qtype).astype(np.float32))
    got = dequantize(data, qtype)
    assert got.shape == (24, 96) and got.dtype == torch.float32
    assert torch.equal(got, expected)
    # and the round trip stays within one quantization step of the original
    step = {Q.Q4_0: 1 / 8, Q.Q4_1: 1 / 8, Q.Q8_0: 1 / 64, Q.F16: 1e-3, Q.BF16: 1e-2, Q.F32: 0.0}[
        qtype
    ]
    assert float((got - torch.from_numpy(w)).abs().max()) <= step * float(np.abs(w).max())


# ---- tiny GGUF files per architecture --------------------------------------------------------


def llama_cpp_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf.py LlamaModel.permute, copied: what llama.cpp does to Q/K rows."""
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def tiny_hf_model(arch: str, tied: bool, vocab_size: int):
    from transformers import (
        LlamaConfig,
        LlamaForCausalLM,
        Qwen2Config,
        Qwen2ForCausalLM,
        Qwen3Config,
        Qwen3ForCausalLM,
    )

    kw = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=tied,
        rms_norm_eps=1e-5,
    )
    torch.manual_seed(0)
    if arch == "llama":
        model = LlamaForCausalLM(LlamaConfig(**kw))
    elif arch == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**kw))
    else:
        model = Qwen3ForCausalLM(Qwen3Config(head_dim=32, **kw))  # head_dim != hidden/heads
    with torch.no_grad():  # norms start at ones; make them distinguishable
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith(".bias"):
                p.copy_(torch.randn_like(p))
    return model.eval()


def write_gguf(
    path: Path,
    arch: str,
    model,
    vocab: dict,
    qtypes: dict[str, Q] | None = None,
    rope_freqs: np.ndarray | None = None,
    raw_extra: dict[str, tuple[np.ndarray, Q]] | None = None,
    tokenizer_model: str = "gpt2",
) -> dict[str, np.ndarray]:
    """Write `model` as llama.cpp would; returns the HF-layout tensors we expect back."""
    cfg = model.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    qtypes = qtypes or {}
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_freq_base(float(cfg.rope_parameters["rope_theta"]))
    w.add_tokenizer_model(tokenizer_model)
    w.add_tokenizer_pre("qwen2" if arch != "llama" else "llama-bpe")
    w.add_token_list(vocab["tokens"])
    w.add_token_types(vocab["types"])
    w.add_token_merges(vocab["merges"])
    w.add_bos_token_id(vocab["bos_id"])
    w.add_eos_token_id(vocab["eos_id"])
    w.add_chat_template(vocab["chat_template"])
    names = gguf.get_tensor_name_map(ARCHS[arch], cfg.num_hidden_layers)
    expected = {}
    for hf_name, tensor in model.state_dict().items():
        if hf_name == "lm_head.weight" and cfg.tie_word_embeddings:
            continue
        data = tensor.detach().numpy().astype(np.float32)
        if arch == "llama" and (".q_proj." in hf_name or ".k_proj." in hf_name):
            heads = cfg.num_attention_heads if ".q_proj." in hf_name else cfg.num_key_value_heads
            data_file = llama_cpp_permute(data, heads)
        else:
            data_file = data
        qtype = qtypes.get(hf_name, Q.F32)
        gguf_name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if qtype == Q.F32:
            w.add_tensor(gguf_name, data_file)
            expected[hf_name] = data
        else:
            packed = gguf_quantize(data_file, qtype)
            w.add_tensor(gguf_name, packed, raw_dtype=qtype)
            back = gguf_dequantize(packed, qtype).astype(np.float32)
            if data_file is not data:  # undo the permutation of the dequantized rows
                back = (
                    back.reshape(heads, data.shape[0] // heads // 2, 2, -1)
                    .swapaxes(1, 2)
                    .reshape(data.shape)
                )
            expected[hf_name] = back
    if rope_freqs is not None:
        w.add_tensor("rope_freqs.weight", rope_freqs)
    for name, (raw, qtype) in (raw_extra or {}).items():
        w.add_tensor(name, raw, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return expected


@pytest.mark.parametrize("arch,tied", [("llama", False), ("qwen2", True), ("qwen3", False)])
def test_tiny_gguf_roundtrip(tmp_path, tiny_vocab, arch, tied):
    model = tiny_hf_model(arch, tied, len(tiny_vocab["tokens"]))
    expected = write_gguf(tmp_path / "m.gguf", arch, model, tiny_vocab)
    loaded = load_model_files(tmp_path / "m.gguf")
    assert set(loaded.state_dict) == set(expected)
    for name, tensor in loaded.state_dict.items():
        assert torch.equal(tensor, torch.from_numpy(expected[name])), name
    c = loaded.config
    assert c.arch == arch and c.tie_word_embeddings == tied
    assert c.attention_bias == (arch == "qwen2") and c.qk_norm == (arch == "qwen3")
    assert c.head_dim == (32 if arch == "qwen3" else 16)
    assert c.eos_token_ids == [tiny_vocab["eos_id"]] and c.bos_token_id == tiny_vocab["bos_id"]
    assert loaded.tokenizer.apply_chat_template([{"role": "user", "content": "hi"}]).endswith(
        "<|im_start|>assistant\n"
    )


def test_tiny_gguf_quantized_llama(tmp_path, tiny_vocab):
    model = tiny_hf_model("llama", False, len(tiny_vocab["tokens"]))
    qtypes = {
        "model.layers.0.self_attn.q_proj.weight": Q.Q4_0,
        "model.layers.0.self_attn.k_proj.weight": Q.Q4_1,
        "model.layers.1.mlp.down_proj.weight": Q.Q8_0,
        "model.embed_tokens.weight": Q.F16,
        "lm_head.weight": Q.Q8_0,
    }
    factors = np.linspace(1.0, 8.0, 8).astype(np.float32)
    expected = write_gguf(
        tmp_path / "q.gguf", "llama", model, tiny_vocab, qtypes, rope_freqs=factors
    )
    loaded = load_model_files(tmp_path / "q.gguf")
    original = model.state_dict()
    for name in qtypes:
        got = loaded.state_dict[name]
        assert torch.equal(got, torch.from_numpy(expected[name])), name
        # quantized weights stay near the originals, in the original (unpermuted) row order
        assert float((got - original[name]).abs().max()) < 0.05, name
    assert loaded.config.rope_scaling == {"rope_type": "freq_factors", "factors": factors.tolist()}


# ---- errors ---------------------------------------------------------------------------------


def test_missing_file(tmp_path):
    with pytest.raises(ModelLoadError, match="no such file"):
        load_model_files(tmp_path / "absent.gguf")


@pytest.mark.parametrize("n_bytes", [100, 3_000_000])
def test_truncated_gguf(tmp_path, smollm2_path, n_bytes):
    with smollm2_path.open("rb") as f:
        (tmp_path / "cut.gguf").write_bytes(f.read(n_bytes))
    with pytest.raises(ModelLoadError, match="truncated"):
        load_model_files(tmp_path / "cut.gguf")


def test_not_a_gguf(tmp_path):
    (tmp_path / "x.gguf").write_bytes(b"PK\x03\x04 not a gguf at all")
    with pytest.raises(ModelLoadError, match="not a GGUF file"):
        load_model_files(tmp_path / "x.gguf")


def test_unsupported_architecture_gguf(tmp_path):
    w = gguf.GGUFWriter(str(tmp_path / "m.gguf"), "mamba")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((8, 32), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ModelLoadError, match="unsupported architecture 'mamba'"):
        load_model_files(tmp_path / "m.gguf")


def test_unsupported_quant_type(tmp_path, tiny_vocab):
    model = tiny_hf_model("llama", True, len(tiny_vocab["tokens"]))
    # an otherwise valid file, plus one Q2_K tensor (256 weights per 84-byte block)
    q2k = {"blk.0.attn_q_a.weight": (np.zeros((4, 84), dtype=np.uint8), Q.Q2_K)}
    write_gguf(tmp_path / "k.gguf", "llama", model, tiny_vocab, raw_extra=q2k)
    with pytest.raises(
        ModelLoadError, match="blk.0.attn_q_a.weight: unsupported quantization type Q2_K"
    ):
        load_model_files(tmp_path / "k.gguf")


def test_unsupported_tokenizer_model(tmp_path, tiny_vocab):
    model = tiny_hf_model("llama", True, len(tiny_vocab["tokens"]))
    write_gguf(tmp_path / "spm.gguf", "llama", model, tiny_vocab, tokenizer_model="llama")
    with pytest.raises(
        ModelLoadError, match="cannot build the tokenizer: unsupported GGUF tokenizer model 'llama'"
    ):
        load_model_files(tmp_path / "spm.gguf")


def test_folder_with_one_gguf(tmp_path, tiny_vocab):
    model = tiny_hf_model("qwen2", True, len(tiny_vocab["tokens"]))
    write_gguf(tmp_path / "only.gguf", "qwen2", model, tiny_vocab)
    loaded = load_model_files(tmp_path)
    assert loaded.source == str(tmp_path / "only.gguf") and loaded.config.arch == "qwen2"
