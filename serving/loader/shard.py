"""Tensor-parallel shards of HF-named weights: which slice of each tensor a rank holds, and reading
only that slice from safetensors files (GGUF tensors are dequantized one at a time, then sliced).

Column-parallel weights (q/k/v, gate/up, the vocabulary rows of the embedding and LM head) are cut
along their output rows; row-parallel weights (o_proj, down_proj) along their input columns;
norms and the o_proj bias are replicated. The cuts come from serving/distributed/partition.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import SafetensorError, safe_open

from serving.distributed.partition import balanced_range, head_shard, vocab_range, vocab_shard_size
from serving.loader.config import ModelConfig
from serving.loader.errors import ModelLoadError


@dataclass(frozen=True)
class ShardSpec:
    rank: int
    world_size: int


@dataclass(frozen=True)
class TensorSlice:
    dim: int  # 0: output rows, 1: input columns
    start: int
    end: int
    padded: int | None = None  # rows after zero padding (vocabulary shards)


def tensor_slice(name: str, config: ModelConfig, spec: ShardSpec) -> TensorSlice | None:
    """The slice of HF tensor `name` that `spec.rank` holds; None: replicated whole."""
    ws, rank = spec.world_size, spec.rank
    if name in ("model.embed_tokens.weight", "lm_head.weight"):
        start, end = vocab_range(config.vocab_size, ws, rank)
        return TensorSlice(0, start, end, vocab_shard_size(config.vocab_size, ws))
    hd = config.head_dim
    heads = head_shard(config.num_attention_heads, config.num_key_value_heads, ws, rank)
    leaf = name.rsplit(".", 2)[-2:]  # e.g. ["q_proj", "weight"]
    if leaf[0] == "q_proj":
        return TensorSlice(0, heads.q_start * hd, (heads.q_start + heads.q_count) * hd)
    if leaf[0] in ("k_proj", "v_proj"):
        return TensorSlice(0, heads.kv_start * hd, (heads.kv_start + heads.kv_count) * hd)
    if leaf == ["o_proj", "weight"]:
        return TensorSlice(1, heads.q_start * hd, (heads.q_start + heads.q_count) * hd)
    start, end = balanced_range(config.intermediate_size, ws, rank)
    if leaf[0] in ("gate_proj", "up_proj"):
        return TensorSlice(0, start, end)
    if leaf[0] == "down_proj":
        return TensorSlice(1, start, end)
    return None


def apply_slice(full: torch.Tensor, cut: TensorSlice | None) -> torch.Tensor:
    if cut is None:
        return full
    part = full[cut.start : cut.end] if cut.dim == 0 else full[:, cut.start : cut.end]
    return _pad_rows(part, cut)


def _pad_rows(part: torch.Tensor, cut: TensorSlice) -> torch.Tensor:
    if cut.padded is None or part.shape[0] == cut.padded:
        return part.contiguous()
    # zero rows for the padded ids: their embeddings and logits are never read
    return F.pad(part, (0, 0, 0, cut.padded - part.shape[0])).contiguous()


def shard_state_dict(
    config: ModelConfig, state: dict[str, torch.Tensor], spec: ShardSpec
) -> dict[str, torch.Tensor]:
    return {name: apply_slice(t, tensor_slice(name, config, spec)) for name, t in state.items()}


def read_safetensors_shard(
    file: Path, config: ModelConfig, spec: ShardSpec
) -> dict[str, torch.Tensor]:
    """Only this rank's slice of every tensor in `file` is read from disk."""
    out: dict[str, torch.Tensor] = {}
    try:
        with safe_open(str(file), framework="pt") as f:
            names = f.keys()  # a safe_open handle is not iterable
            for name in names:
                if name.endswith("rotary_emb.inv_freq"):
                    continue
                cut = tensor_slice(name, config, spec)
                if cut is None:
                    t = f.get_tensor(name)
                else:
                    view = f.get_slice(name)
                    t = view[cut.start : cut.end] if cut.dim == 0 else view[:, cut.start : cut.end]
                    t = _pad_rows(t, cut)
                out[name] = t.to(torch.float32)
    except (SafetensorError, OSError) as exc:
        raise ModelLoadError(f"{file}: unreadable safetensors file (truncated?): {exc}") from exc
    return out
