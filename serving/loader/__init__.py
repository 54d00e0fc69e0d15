"""Model loading: GGUF files and HF directories into a `LoadedModel` (config, state dict,
tokenizer)."""

from serving.loader.config import ModelConfig
from serving.loader.errors import ModelLoadError
from serving.loader.load import (
    LoadedModel,
    default_model_path,
    expected_tensor_names,
    load_model_files,
)
from serving.loader.rope import rope_inv_freq

__all__ = [
    "LoadedModel",
    "ModelConfig",
    "ModelLoadError",
    "default_model_path",
    "expected_tensor_names",
    "load_model_files",
    "rope_inv_freq",
]
