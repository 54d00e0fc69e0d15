"""`EngineConfig`: what the engine needs, built from `vigil.config.Settings` or by hand in tests.

The defaults live in one place, the settings (`VIGIL_*`, validated there): every field named like
a setting takes that setting's default, and `from_settings` copies every such field. The settings
are the source rather than this dataclass because `vigil.config` is the leaf every package
imports; it must not pull in torch through the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import torch

from vigil.config import Settings


def _setting(name: str) -> Any:
    return Settings.model_fields[name].default


@dataclass
class EngineConfig:
    model_path: str | None = _setting("model_path")  # None: the default SmolLM2 GGUF
    device: str = _setting("device")  # "auto" | "cpu" | "cuda"
    dtype: str = _setting("dtype")  # "auto" (float32 on CPU, bfloat16 on GPU) | "float32" | ...
    block_size: int = _setting("block_size")
    kv_cache_memory_mb: int = _setting("kv_cache_memory_mb")
    num_kv_blocks: int | None = None  # overrides the memory budget (tests use tiny pools)
    max_num_seqs: int = _setting("max_num_seqs")
    max_num_batched_tokens: int = _setting("max_num_batched_tokens")
    max_model_len: int | None = _setting("max_model_len")  # None: the model's (capped by the pool)
    enable_prefix_caching: bool = _setting("enable_prefix_caching")
    kv_cache_dtype: str = _setting("kv_cache_dtype")  # "auto": the model dtype | "fp8": e4m3
    enable_chunked_prefill: bool = _setting("enable_chunked_prefill")
    torch_threads: int | None = _setting("torch_threads")
    enable_cuda_graphs: bool = _setting("enable_cuda_graphs")  # GPU only
    capture_graphs_at_start: bool = _setting("capture_graphs_at_start")  # GPU only
    warm_up_at_start: bool = _setting("warm_up_at_start")  # GPU only
    tensor_parallel_size: int = _setting("tensor_parallel_size")  # > 1: serving/distributed
    async_scheduling: str = _setting("async_scheduling")  # "auto" (CUDA only) | "on" | "off"
    tp_allreduce: str = _setting(
        "tp_allreduce"
    )  # "auto" | "nccl" | "symm_mem" (serving/distributed/all_reduce.py)
    programmatic_launch: str = _setting(
        "programmatic_launch"
    )  # "auto" | "off" (serving/kernels/pdl.py)

    @classmethod
    def from_settings(cls, settings: Settings) -> EngineConfig:
        return cls(**{f.name: getattr(settings, f.name) for f in fields(cls)
                      if f.name in Settings.model_fields})  # fmt: skip

    def resolve_device(self) -> torch.device:
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ValueError("device is 'cuda' but no CUDA device is available")
        return torch.device(self.device)

    def resolve_async_scheduling(self, device: torch.device) -> bool:
        if self.async_scheduling == "auto":
            return device.type == "cuda"
        if self.async_scheduling in ("on", "off"):
            return self.async_scheduling == "on"
        raise ValueError(
            f"unknown async_scheduling {self.async_scheduling!r} (expected 'auto', 'on' or 'off')"
        )

    def resolve_dtype(self, device: torch.device) -> torch.dtype:
        if self.dtype == "auto":
            return torch.float32 if device.type == "cpu" else torch.bfloat16
        try:
            return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[
                self.dtype
            ]
        except KeyError:
            raise ValueError(f"unknown dtype {self.dtype!r}") from None

    def resolve_kv_dtype(self, dtype: torch.dtype) -> torch.dtype:
        if self.kv_cache_dtype == "auto":
            return dtype
        if self.kv_cache_dtype == "fp8":
            return torch.float8_e4m3fn
        raise ValueError(
            f"unknown kv_cache_dtype {self.kv_cache_dtype!r} (expected 'auto' or 'fp8')"
        )
