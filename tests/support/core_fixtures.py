"""Helpers for the engine-core process tests: a tiny random Llama saved to disk (the core
process loads it by path), engine configs over it, and stream drivers."""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine_fixtures import save_tiny_model

from serving.engine import EngineConfig


def tiny_model_dir(root: Path) -> Path:
    path = root / "tiny-llama"
    if not (path / "config.json").exists():
        path.mkdir(parents=True, exist_ok=True)
        save_tiny_model("llama", path)
    return path


def tiny_config(model_dir: Path, **overrides) -> EngineConfig:
    cfg = dict(
        model_path=str(model_dir),
        device="cpu",
        block_size=4,
        num_kv_blocks=256,
        max_num_batched_tokens=64,
        max_num_seqs=16,
        torch_threads=1,
    )
    cfg.update(overrides)
    return EngineConfig(**cfg)


async def collect(engine, request_id: str, ids: list[int], params, reader_delay_s: float = 0.0):
    """Every output the stream yields (sleeping `reader_delay_s` after each, a slow reader)."""
    outs = []
    async for out in engine.generate(request_id, ids, params):
        outs.append(out)
        if reader_delay_s:
            await asyncio.sleep(reader_delay_s)
    return outs
