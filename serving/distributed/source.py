"""Where each rank gets its weights: a model path (GGUF or HF directory, each rank reads its own
slices), a full `LoadedModel` already in memory (tests: each rank slices it), or random weights of
an HF config made on the rank's device (benchmarks of shapes too big for the host)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from serving.loader.load import LoadedModel, shard_loaded
from serving.loader.shard import ShardSpec


@dataclass(frozen=True)
class ModelSource:
    path: str | None = None
    loaded: LoadedModel | None = None  # a full one
    random_config: dict[str, Any] | None = None  # HF config.json as a dict
    seed: int = 0

    def load_shard(self, spec: ShardSpec, device: torch.device, dtype: torch.dtype) -> LoadedModel:
        if self.loaded is not None:
            return shard_loaded(self.loaded, spec)
        if self.random_config is not None:
            from serving.loader.random_weights import random_loaded

            return random_loaded(
                self.random_config, seed=self.seed, device=device, dtype=dtype, shard=spec
            )
        from serving.loader import default_model_path, load_model_files

        return load_model_files(self.path or default_model_path(), shard=spec)
