"""Engines for the tensor-parallel rows of bench_throughput: random weights made on each GPU
(never on the host), the same weights at TP=1 and TP=N (one seeded generator per tensor); both
with the same async scheduling mode."""

from __future__ import annotations

import torch

from serving.distributed.source import ModelSource
from serving.engine import build_engine
from serving.engine.config import EngineConfig


def make_tp_engine(
    shape: dict,
    *,
    tp: int,
    max_num_seqs: int,
    kv_tokens: int,
    kv_cache_dtype: str = "auto",
    async_scheduling: str = "on",
    tp_allreduce: str = "auto",
):
    block = 16
    cfg = EngineConfig(
        device="cuda",
        dtype="bfloat16",
        block_size=block,
        num_kv_blocks=-(-kv_tokens // block) + max_num_seqs + 8,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=8192,
        enable_prefix_caching=False,
        kv_cache_dtype=kv_cache_dtype,
        tensor_parallel_size=tp,
        async_scheduling=async_scheduling,
        tp_allreduce=tp_allreduce,
    )
    if tp == 1:
        from serving.loader.random_weights import random_loaded

        return build_engine(cfg, loaded=random_loaded(shape, device="cuda", dtype=torch.bfloat16))
    return build_engine(cfg, loaded=ModelSource(random_config=dict(shape)))
