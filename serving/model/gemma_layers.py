"""Gemma 3 / Gemma 4 text decoder blocks over the paged KV cache.

Each layer is built from its `LayerSpec` (serving/attention/layer_spec.py): sliding and full
layers differ in window, rope and, in Gemma 4, head_dim and KV-head count. Ops follow HF
transformers' order (norms in float32, then cast) so greedy tokens match the oracle:
- Gemma 3's RMSNorm scales by (1 + weight); Gemma 4's by weight, with x * pow(ms, -0.5);
- q and k are RMS-normed per head before RoPE; Gemma 4 also normalises v (no weight), and its
  `attention_k_eq_v` full layers take v from the key projection's output (before the k norm);
- four norms per layer: after attention and around the MLP (gelu-tanh gated);
- Gemma 4: a per-layer input (PLE) gated into the residual, then the whole layer's output scaled
  by a loaded `layer_scalar`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from serving.attention.base import AttentionBackend, AttentionMetadata
from serving.attention.layer_spec import LayerSpec
from serving.loader.config import ModelConfig
from serving.model.rope import apply_rope


class GemmaRMSNorm(nn.Module):
    """`one_plus`: Gemma 3's (1 + weight); else Gemma 4's weight (or none, `with_scale=False`)."""

    def __init__(self, dim: int, eps: float, one_plus: bool, with_scale: bool = True):
        super().__init__()
        self.eps, self.one_plus, self.with_scale = eps, one_plus, with_scale
        if with_scale:
            self.weight = nn.Parameter(torch.zeros(dim) if one_plus else torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        ms = xf.pow(2).mean(-1, keepdim=True) + self.eps
        if self.one_plus:
            out = xf * torch.rsqrt(ms) * (1.0 + self.weight.float())
        else:
            out = xf * torch.pow(ms, -0.5)
            if self.with_scale:
                out = out * self.weight.float()
        return out.type_as(x)


class GemmaAttention(nn.Module):
    def __init__(self, config: ModelConfig, spec: LayerSpec, gemma4: bool):
        super().__init__()
        self.spec = spec
        self.num_heads, self.num_kv_heads, self.head_dim = (
            spec.num_heads,
            spec.num_kv_heads,
            spec.head_dim,
        )
        self.q_size = spec.num_heads * spec.head_dim
        self.kv_size = spec.num_kv_heads * spec.head_dim
        self.reads_other = spec.kv_source is not None  # Gemma 4 KV sharing: no k/v of its own
        # Gemma 4's full layers with attention_k_eq_v: v is the key projection's output
        self.k_is_v = gemma4 and config.k_eq_v and spec.sliding_window is None
        kv_out = 0 if self.reads_other else self.kv_size * (1 if self.k_is_v else 2)
        bias = bool(config.attention_bias)
        self.qkv_proj = nn.Linear(config.hidden_size, self.q_size + kv_out, bias=bias)
        self.o_proj = nn.Linear(self.q_size, config.hidden_size, bias=bias)
        one_plus, eps = not gemma4, config.rms_norm_eps
        self.q_norm = GemmaRMSNorm(self.head_dim, eps, one_plus)
        self.v_norm = None
        if not self.reads_other:
            self.k_norm = GemmaRMSNorm(self.head_dim, eps, one_plus)
            if gemma4:
                self.v_norm = GemmaRMSNorm(self.head_dim, eps, False, with_scale=False)

    def forward(
        self,
        hidden: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        kv_cache: tuple[torch.Tensor, torch.Tensor],
        meta: AttentionMetadata,
        backend: AttentionBackend,
    ) -> torch.Tensor:
        n = hidden.shape[0]
        qkv = self.qkv_proj(hidden)
        q = qkv[:, : self.q_size].reshape(n, self.num_heads, self.head_dim)
        q = apply_rope(self.q_norm(q), cos, sin)
        k_cache, v_cache = kv_cache
        if not self.reads_other:
            k = qkv[:, self.q_size : self.q_size + self.kv_size]
            v = k if self.k_is_v else qkv[:, self.q_size + self.kv_size :]
            k = k.reshape(n, self.num_kv_heads, self.head_dim)
            v = v.reshape(n, self.num_kv_heads, self.head_dim)
            k = apply_rope(self.k_norm(k), cos, sin)
            if self.v_norm is not None:
                v = self.v_norm(v)
            backend.write_kv(k, v, k_cache, v_cache, meta.slot_mapping)
        spec = self.spec
        out = backend.forward(
            q, k_cache, v_cache, meta, spec.scale, window=spec.sliding_window, softcap=spec.softcap
        )
        return self.o_proj(out.reshape(n, self.q_size))


class GemmaMLP(nn.Module):
    def __init__(self, hidden_size: int, intermediate: int):
        super().__init__()
        self.intermediate = intermediate
        self.gate_up_proj = nn.Linear(hidden_size, 2 * intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).split(self.intermediate, dim=-1)
        return self.down_proj(F.gelu(gate, approximate="tanh") * up)


class GemmaDecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, index: int, spec: LayerSpec, gemma4: bool):
        super().__init__()
        h, eps, one_plus = config.hidden_size, config.rms_norm_eps, not gemma4
        self.self_attn = GemmaAttention(config, spec, gemma4)
        wide = 2 if index in config.double_wide_mlp_layers else 1
        self.mlp = GemmaMLP(h, config.intermediate_size * wide)
        self.input_layernorm = GemmaRMSNorm(h, eps, one_plus)
        self.post_attention_layernorm = GemmaRMSNorm(h, eps, one_plus)
        self.pre_feedforward_layernorm = GemmaRMSNorm(h, eps, one_plus)
        self.post_feedforward_layernorm = GemmaRMSNorm(h, eps, one_plus)
        self.per_layer_size = config.per_layer_input_size if gemma4 else 0
        if self.per_layer_size:
            self.per_layer_input_gate = nn.Linear(h, self.per_layer_size, bias=False)
            self.per_layer_projection = nn.Linear(self.per_layer_size, h, bias=False)
            self.post_per_layer_input_norm = GemmaRMSNorm(h, eps, False)
        self.layer_scalar = nn.Parameter(torch.ones(1)) if gemma4 else None

    def forward(
        self,
        hidden: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        kv_cache: tuple[torch.Tensor, torch.Tensor],
        meta: AttentionMetadata,
        backend: AttentionBackend,
        per_layer_input: torch.Tensor | None = None,
    ) -> torch.Tensor:
        attn = self.self_attn(self.input_layernorm(hidden), cos, sin, kv_cache, meta, backend)
        hidden = hidden + self.post_attention_layernorm(attn)
        mlp = self.mlp(self.pre_feedforward_layernorm(hidden))
        hidden = hidden + self.post_feedforward_layernorm(mlp)
        if self.per_layer_size and per_layer_input is not None:
            gated = F.gelu(self.per_layer_input_gate(hidden), approximate="tanh")
            projected = self.per_layer_projection(gated * per_layer_input)
            hidden = hidden + self.post_per_layer_input_norm(projected)
        if self.layer_scalar is not None:
            hidden = hidden * self.layer_scalar
        return hidden
