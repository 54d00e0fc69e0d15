"""Read a GGUF file: config from metadata, tensors dequantized into HF Llama naming, tokenizer.

llama.cpp's converter permutes the rows of Q and K for the "llama" architecture (it rotates
interleaved pairs, HF rotates halves); we undo that so the state dict is exactly HF's layout.
Qwen2/Qwen3 files are written unpermuted (NEOX-style RoPE, same as HF).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gguf import GGUFReader

from serving.loader.config import SUPPORTED_ARCHS, ModelConfig
from serving.loader.dequant import SUPPORTED_TYPES, UnsupportedQuantError, dequantize
from serving.loader.errors import ModelLoadError
from serving.loader.shard import ShardSpec, apply_slice, tensor_slice
from serving.tokenizer import Tokenizer

_GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_LAYER_RE = re.compile(r"^blk\.(\d+)\.([a-z_]+)\.(weight|bias)$")


def hf_tensor_name(gguf_name: str) -> str | None:
    """HF Llama name for a GGUF tensor name; None for names we do not know."""
    if gguf_name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[gguf_name]
    m = _LAYER_RE.match(gguf_name)
    if m and m.group(2) in _LAYER_NAMES:
        return f"model.layers.{m.group(1)}.{_LAYER_NAMES[m.group(2)]}.{m.group(3)}"
    return None


def unpermute_qk(w: torch.Tensor, n_head: int) -> torch.Tensor:
    """Inverse of convert_hf_to_gguf's `permute`: reshape(n_head, 2, d, ...).swapaxes(1, 2)."""
    half = w.shape[0] // n_head // 2
    return w.reshape(n_head, half, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


def open_reader(path: Path) -> GGUFReader:
    size = path.stat().st_size
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise ModelLoadError(f"{path}: not a GGUF file (starts with {magic!r}, expected b'GGUF')")
    try:
        reader = GGUFReader(str(path))
    except Exception as exc:  # the reader raises bare ValueError/struct errors on a cut file
        raise ModelLoadError(
            f"{path}: truncated or corrupt GGUF file ({size} bytes): {exc}"
        ) from exc
    for t in reader.tensors:
        if t.data_offset + t.n_bytes > size:
            raise ModelLoadError(
                f"{path}: truncated GGUF: tensor {t.name} ends at byte {t.data_offset + t.n_bytes} "
                f"but the file has {size} bytes"
            )
    return reader


def read_metadata(reader: GGUFReader) -> dict[str, Any]:
    return {key: field.contents() for key, field in reader.fields.items()}


def config_from_gguf(meta: dict[str, Any], tensor_names: set[str], source: str) -> ModelConfig:
    arch = meta.get("general.architecture")
    if arch not in SUPPORTED_ARCHS:
        raise ModelLoadError(
            f"{source}: unsupported architecture {arch!r} (supported: {', '.join(SUPPORTED_ARCHS)})"
        )

    def get(key: str, default: Any = None) -> Any:
        value = meta.get(f"{arch}.{key}", default)
        if value is None:
            raise ModelLoadError(f"{source}: GGUF metadata lacks {arch}.{key}")
        return value

    heads, hidden = int(get("attention.head_count")), int(get("embedding_length"))
    head_dim = int(get("attention.key_length", hidden // heads))
    vocab = meta.get(f"{arch}.vocab_size") or len(meta.get("tokenizer.ggml.tokens") or [])
    scaling_type = meta.get(f"{arch}.rope.scaling.type")
    rope_scaling = None
    if scaling_type == "linear":
        rope_scaling = {"rope_type": "linear", "factor": float(get("rope.scaling.factor"))}
    elif scaling_type not in (None, "none"):
        raise ModelLoadError(f"{source}: unsupported rope scaling type {scaling_type!r}")
    eos = [meta.get(f"tokenizer.ggml.{k}_token_id") for k in ("eos", "eot", "eom")]
    config = ModelConfig(
        arch=arch,
        vocab_size=int(vocab),
        hidden_size=hidden,
        intermediate_size=int(get("feed_forward_length")),
        num_hidden_layers=int(get("block_count")),
        num_attention_heads=heads,
        num_key_value_heads=int(get("attention.head_count_kv", heads)),
        head_dim=head_dim,
        rms_norm_eps=float(get("attention.layer_norm_rms_epsilon")),
        rope_theta=float(get("rope.freq_base", 10000.0)),
        rope_scaling=rope_scaling,
        max_position_embeddings=int(get("context_length")),
        tie_word_embeddings="output.weight" not in tensor_names,
        attention_bias="blk.0.attn_q.bias" in tensor_names,
        qk_norm="blk.0.attn_q_norm.weight" in tensor_names,
        bos_token_id=meta.get("tokenizer.ggml.bos_token_id"),
        eos_token_ids=list(dict.fromkeys(int(e) for e in eos if e is not None)),
    )
    config.validate(source)
    return config


def load_gguf(
    path: Path, shard: ShardSpec | None = None
) -> tuple[ModelConfig, dict[str, torch.Tensor], Tokenizer]:
    """`shard`: keep only that tensor-parallel rank's slices (each tensor is dequantized whole,
    then cut, so at most one full tensor is held at a time)."""
    source = str(path)
    reader = open_reader(path)
    meta = read_metadata(reader)
    config = config_from_gguf(meta, {t.name for t in reader.tensors}, source)
    for t in reader.tensors:  # fail before spending time on dequantizing the rest
        if t.tensor_type not in SUPPORTED_TYPES:
            raise ModelLoadError(
                f"{source}: tensor {t.name}: {UnsupportedQuantError(t.tensor_type)}"
            )
    try:
        tokenizer = Tokenizer.from_gguf_metadata(meta)
    except (KeyError, ValueError) as exc:
        raise ModelLoadError(f"{source}: cannot build the tokenizer: {exc}") from exc
    tokenizer.eos_token_ids |= set(config.eos_token_ids)
    state: dict[str, torch.Tensor] = {}
    for t in reader.tensors:
        if t.name == "rope_freqs.weight":  # llama.cpp's form of Llama-3.1 rope scaling
            factors = dequantize(t.data, t.tensor_type).reshape(-1).tolist()
            config.rope_scaling = {"rope_type": "freq_factors", "factors": factors}
            continue
        name = hf_tensor_name(t.name)
        if name is None:
            raise ModelLoadError(
                f"{source}: unexpected tensor {t.name!r} for architecture {config.arch}"
            )
        w = dequantize(np.asarray(t.data), t.tensor_type)
        if config.arch == "llama" and (".attn_q." in t.name or ".attn_k." in t.name):
            n = config.num_attention_heads if ".attn_q." in t.name else config.num_key_value_heads
            w = unpermute_qk(w, n)
        if shard is not None:
            w = apply_slice(w, tensor_slice(name, config, shard))
        state[name] = w.contiguous()
    return config, state, tokenizer
