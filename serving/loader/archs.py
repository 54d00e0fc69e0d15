"""The `model_type`s the loader serves: the Llama shape (dense and mixture-of-experts) and
Gemma's."""

from __future__ import annotations

from serving.loader.moe_config import MOE_ARCHS

LLAMA_ARCHS = ("llama", "qwen2", "qwen3", "mistral", *MOE_ARCHS)
GEMMA_ARCHS = ("gemma3_text", "gemma4_text")
SUPPORTED_ARCHS = LLAMA_ARCHS + GEMMA_ARCHS
