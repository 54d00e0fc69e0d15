"""Read a Hugging Face model directory: config.json, *.safetensors, tokenizer.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from serving.loader.config import ModelConfig, config_from_hf
from serving.loader.errors import ModelLoadError
from serving.loader.shard import ShardSpec, read_safetensors_shard
from serving.tokenizer import Tokenizer


def _read_json(path: Path, required: bool) -> dict[str, Any]:
    if not path.exists():
        if required:
            raise ModelLoadError(f"{path.parent}: missing {path.name}")
        return {}
    try:
        parsed: dict[str, Any] = json.loads(path.read_text())
        return parsed
    except json.JSONDecodeError as exc:
        raise ModelLoadError(f"{path}: invalid JSON: {exc}") from exc


def load_hf_dir(
    path: Path, shard: ShardSpec | None = None
) -> tuple[ModelConfig, dict[str, torch.Tensor], Tokenizer]:
    """`shard`: read only that tensor-parallel rank's slices."""
    source = str(path)
    config = config_from_hf(
        _read_json(path / "config.json", required=True),
        _read_json(path / "generation_config.json", required=False),
        source,
    )
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise ModelLoadError(f"{source}: no *.safetensors weight files")
    state: dict[str, torch.Tensor] = {}
    for file in files:
        if shard is not None:
            state.update(read_safetensors_shard(file, config, shard))
            continue
        try:
            part = load_file(str(file))
        except (SafetensorError, OSError) as exc:
            raise ModelLoadError(
                f"{file}: unreadable safetensors file (truncated?): {exc}"
            ) from exc
        state.update({k: v.to(torch.float32) for k, v in part.items()})
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    for key in [k for k in state if k.endswith("rotary_emb.inv_freq")]:  # old checkpoints
        del state[key]
    if not (path / "tokenizer.json").exists():
        raise ModelLoadError(f"{source}: missing tokenizer.json")
    tokenizer = Tokenizer.from_hf_dir(path, eos_token_ids=config.eos_token_ids)
    if not config.eos_token_ids and tokenizer.eos_token_id is not None:
        config.eos_token_ids = [tokenizer.eos_token_id]
    if config.bos_token_id is None:
        config.bos_token_id = tokenizer.bos_token_id
    return config, state, tokenizer
