"""Decoder models written in the project (the Llama family), run over the paged KV cache."""

from serving.model.llama import LlamaForCausalLM, build_model

__all__ = ["LlamaForCausalLM", "build_model"]
