"""`EngineConfig`: what the engine needs, built from `vigil.config.Settings` or by hand in tests."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class EngineConfig:
    model_path: str | None = None  # None: the default SmolLM2 GGUF
    device: str = "auto"  # "auto" | "cpu" | "cuda"
    dtype: str = "auto"  # "auto" (float32 on CPU, bfloat16 on GPU) | "float32" | "bfloat16" | "float16"
    block_size: int = 16
    kv_cache_memory_mb: int = 512
    num_kv_blocks: int | None = None  # overrides the memory budget (tests use tiny pools)
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 2048
    max_model_len: int | None = None  # None: the model's max_position_embeddings (capped by the pool)
    enable_prefix_caching: bool = True
    kv_cache_dtype: str = "auto"  # "auto": the model dtype | "fp8": e4m3 (GPU kernels; scale 1)
    enable_chunked_prefill: bool = True
    torch_threads: int | None = None
    enable_cuda_graphs: bool = True  # GPU only: decode steps replayed from captured graphs

    @classmethod
    def from_settings(cls, settings) -> EngineConfig:
        return cls(
            model_path=settings.model_path,
            device=settings.device,
            dtype=settings.dtype,
            block_size=settings.block_size,
            kv_cache_memory_mb=settings.kv_cache_memory_mb,
            max_num_seqs=settings.max_num_seqs,
            max_num_batched_tokens=settings.max_num_batched_tokens,
            max_model_len=settings.max_model_len,
            enable_prefix_caching=settings.enable_prefix_caching,
            kv_cache_dtype=settings.kv_cache_dtype,
            torch_threads=settings.torch_threads,
        )

    def resolve_device(self) -> torch.device:
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ValueError("device is 'cuda' but no CUDA device is available")
        return torch.device(self.device)

    def resolve_dtype(self, device: torch.device) -> torch.dtype:
        if self.dtype == "auto":
            return torch.float32 if device.type == "cpu" else torch.bfloat16
        try:
            return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[self.dtype]
        except KeyError:
            raise ValueError(f"unknown dtype {self.dtype!r}") from None

    def resolve_kv_dtype(self, dtype: torch.dtype) -> torch.dtype:
        if self.kv_cache_dtype == "auto":
            return dtype
        if self.kv_cache_dtype == "fp8":
            return torch.float8_e4m3fn
        raise ValueError(f"unknown kv_cache_dtype {self.kv_cache_dtype!r} (expected 'auto' or 'fp8')")
