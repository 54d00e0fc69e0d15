"""Gemma 3 and Gemma 4 text decoders (`gemma3_text`, `gemma4_text`) over the paged KV cache.

Beyond the Llama shape: the embedding scaled by sqrt(hidden_size) (in the weight dtype), a rope
per layer type (sliding layers a local base, full layers a global one; Gemma 4's full layers
rotate only a fraction of their head), per-layer geometry from `config.layers()`, final-logit
soft-capping, and Gemma 4's per-layer input embeddings (PLE): a second, packed embedding table
plus a projection of the main embedding, one slice of each fed to every layer. Layers in several
KV-cache groups each read their own group's block table (`AttentionMetadata.for_groups`).
"""

from __future__ import annotations

from typing import cast

import torch
from torch import nn

from serving.attention.base import AttentionBackend, AttentionMetadata
from serving.attention.layer_spec import LayerSpec, RopeSpec, kv_groups, layer_slots
from serving.loader.config import ModelConfig
from serving.model.gemma_layers import GemmaDecoderLayer, GemmaRMSNorm
from serving.model.rope import RotaryEmbedding


class GemmaForCausalLM(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.gemma4 = config.arch == "gemma4_text"
        specs = config.layers()
        h = config.hidden_size
        self.embed_tokens = nn.Embedding(config.vocab_size, h)
        self.layers = nn.ModuleList(
            GemmaDecoderLayer(config, i, spec, self.gemma4) for i, spec in enumerate(specs)
        )
        self.norm = GemmaRMSNorm(h, config.rms_norm_eps, one_plus=not self.gemma4)
        self.ple = config.per_layer_input_size if self.gemma4 else 0
        if self.ple:
            n = config.num_hidden_layers
            self.embed_tokens_per_layer = nn.Embedding(config.per_layer_vocab_size, n * self.ple)
            self.per_layer_model_projection = nn.Linear(h, n * self.ple, bias=False)
            self.per_layer_projection_norm = GemmaRMSNorm(self.ple, config.rms_norm_eps, False)
        self.tie_word_embeddings = bool(config.tie_word_embeddings)
        if not self.tie_word_embeddings:
            self.lm_head = nn.Linear(h, config.vocab_size, bias=False)
        groups = kv_groups(specs)
        self.num_kv_groups = len(groups)
        self.layer_group = [g for g, _ in layer_slots(specs, groups)]
        self._build_rotaries()

    def _build_rotaries(self) -> None:
        """One rotary table per distinct (rope, head_dim); `layer_rope[i]` indexes it."""
        keys: list[tuple[RopeSpec, int]] = []
        self.layer_rope: list[int] = []
        for spec in self.config.layers():
            key = (spec.rope, spec.head_dim)
            if key not in keys:
                keys.append(key)
            self.layer_rope.append(keys.index(key))
        first_spec: dict[tuple[RopeSpec, int], LayerSpec] = {}
        for spec in self.config.layers():
            first_spec.setdefault((spec.rope, spec.head_dim), spec)
        self.rotaries = nn.ModuleList(RotaryEmbedding(self.config, first_spec[k]) for k in keys)

    @property
    def lm_head_weight(self) -> torch.Tensor:
        return self.embed_tokens.weight if self.tie_word_embeddings else self.lm_head.weight

    def _per_layer_inputs(self, input_ids: torch.Tensor, embeds: torch.Tensor) -> torch.Tensor:
        n, layers = input_ids.shape[0], self.config.num_hidden_layers
        table = self.embed_tokens_per_layer
        scale = torch.tensor(self.ple**0.5).to(table.weight.dtype)
        token_part = (table(input_ids) * scale).reshape(n, layers, self.ple)
        projected = self.per_layer_model_projection(embeds) * self.config.hidden_size**-0.5
        projected = self.per_layer_projection_norm(projected.reshape(n, layers, self.ple))
        return (projected + token_part) * 2.0**-0.5

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        kv_caches: list[tuple[torch.Tensor, torch.Tensor]],
        meta: AttentionMetadata,
        backend: AttentionBackend,
    ) -> torch.Tensor:
        weight = self.embed_tokens.weight
        hidden = self.embed_tokens(input_ids) * torch.tensor(self.config.hidden_size**0.5).to(
            weight.dtype
        )
        per_layer = self._per_layer_inputs(input_ids, hidden) if self.ple else None
        rotaries = cast(list[RotaryEmbedding], self.rotaries)
        ropes = [rot.cos_sin(positions, hidden.dtype) for rot in rotaries]
        metas = meta.for_groups(self.num_kv_groups)
        for i, (layer, kv) in enumerate(zip(self.layers, kv_caches, strict=True)):
            cos, sin = ropes[self.layer_rope[i]]
            extra = per_layer[:, i] if per_layer is not None else None
            hidden = layer(hidden, cos, sin, kv, metas[self.layer_group[i]], backend, extra)
        return self.norm(hidden)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = torch.nn.functional.linear(hidden, self.lm_head_weight).float()
        cap = self.config.final_logit_softcap
        return logits if cap is None else torch.tanh(logits / cap) * cap


def gemma_state_dict(config: ModelConfig, sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """HF names onto this module's: drop the `model.` prefix, fuse q/k/v and gate/up."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in sd.items():
        short = name.removeprefix("model.")
        attn = ".self_attn." in short and any(f".{x}_proj." in short for x in "qkv")
        mlp = ".mlp.gate_proj." in short or ".mlp.up_proj." in short
        if not (attn or mlp):
            out[short] = tensor
    for i in range(config.num_hidden_layers):
        p = f"model.layers.{i}."
        names = [p + f"self_attn.{x}_proj.weight" for x in "qkv"]
        parts = [sd[name] for name in names if name in sd]
        out[f"layers.{i}.self_attn.qkv_proj.weight"] = torch.cat(parts, dim=0)
        gate_up = [sd[p + "mlp.gate_proj.weight"], sd[p + "mlp.up_proj.weight"]]
        out[f"layers.{i}.mlp.gate_up_proj.weight"] = torch.cat(gate_up, dim=0)
    return out


def build_gemma(
    config: ModelConfig,
    state_dict: dict[str, torch.Tensor],
    device: str | torch.device,
    dtype: torch.dtype,
) -> GemmaForCausalLM:
    with torch.device("meta"):
        model = GemmaForCausalLM(config)
    fused = gemma_state_dict(config, state_dict)
    expected = dict(model.named_parameters())
    missing = sorted(expected.keys() - fused.keys())
    if missing:
        raise ValueError(f"model weights are missing tensors: {', '.join(missing[:5])}")
    for name, param in expected.items():
        if tuple(fused[name].shape) != tuple(param.shape):
            raise ValueError(
                f"weight {name} has shape {tuple(fused[name].shape)}, the config implies "
                f"{tuple(param.shape)}"
            )
    tensors = {k: fused[k].to(device=device, dtype=dtype).contiguous() for k in expected}
    model.load_state_dict(tensors, strict=True, assign=True)
    model._build_rotaries()  # buffers were created on meta
    model.rotaries.to(device)
    return model.eval()
