"""Building blocks of the Llama-family decoder: RMSNorm, attention over the paged cache, SwiGLU MLP.

Ops follow HF transformers' order of operations (norm in float32, rotate-half RoPE, separate
residual adds) so greedy tokens match the oracle exactly; q/k/v and gate/up are fused into one
matmul each (fewer, larger GEMMs are what make a CPU step fast).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from serving.attention.base import AttentionBackend, AttentionMetadata
from serving.attention.layer_spec import LayerSpec
from serving.distributed.context import ParallelContext
from serving.distributed.partition import balanced_range, head_shard
from serving.loader.config import ModelConfig
from serving.model.parallel_layers import column_linear, row_linear
from serving.model.rope import apply_rope


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(dtype)


class Attention(nn.Module):
    def __init__(
        self,
        config: ModelConfig,
        qkv_bias: bool,
        o_bias: bool,
        tp: ParallelContext | None = None,
        spec: LayerSpec | None = None,
    ):
        super().__init__()
        spec = spec if spec is not None else config.layers()[0]
        self.num_heads = spec.num_heads
        self.num_kv_heads = spec.num_kv_heads
        if tp is not None:  # this rank's heads only (serving/distributed/partition.py)
            shard = head_shard(self.num_heads, self.num_kv_heads, tp.world_size, tp.rank)
            self.num_heads, self.num_kv_heads = shard.q_count, shard.kv_count
        self.head_dim = spec.head_dim
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        self.scale = spec.scale
        self.sliding_window = spec.sliding_window
        self.softcap = spec.softcap
        self.qkv_proj = column_linear(
            config.hidden_size, self.q_size + 2 * self.kv_size, qkv_bias, tp
        )
        self.o_proj = row_linear(self.q_size, config.hidden_size, o_bias, tp)
        self.qk_norm = bool(getattr(config, "qk_norm", False))
        if self.qk_norm:  # Qwen3: RMSNorm over each head's q and k before RoPE
            self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
            self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
        # gpt-oss: a learned logit per head that joins every softmax and takes its share of it
        self.sinks = (
            nn.Parameter(torch.empty(self.num_heads))
            if getattr(config, "attention_sinks", False)
            else None
        )

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
        q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q = q.reshape(n, self.num_heads, self.head_dim)
        k = k.reshape(n, self.num_kv_heads, self.head_dim)
        v = v.reshape(n, self.num_kv_heads, self.head_dim)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        k_cache, v_cache = kv_cache
        backend.write_kv(k, v, k_cache, v_cache, meta.slot_mapping)
        sinks = {} if self.sinks is None else {"sinks": self.sinks}  # gpt-oss only
        out = backend.forward(
            q,
            k_cache,
            v_cache,
            meta,
            self.scale,
            window=self.sliding_window,
            softcap=self.softcap,
            **sinks,
        )
        return self.o_proj(out.reshape(n, self.q_size))


class MLP(nn.Module):
    def __init__(self, config: ModelConfig, tp: ParallelContext | None = None):
        super().__init__()
        self.intermediate = config.intermediate_size
        if tp is not None:
            start, end = balanced_range(self.intermediate, tp.world_size, tp.rank)
            self.intermediate = end - start
        self.gate_up_proj = column_linear(config.hidden_size, 2 * self.intermediate, False, tp)
        self.down_proj = row_linear(self.intermediate, config.hidden_size, False, tp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).split(self.intermediate, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class DecoderLayer(nn.Module):
    def __init__(
        self,
        config: ModelConfig,
        qkv_bias: bool,
        o_bias: bool,
        tp: ParallelContext | None = None,
        spec: LayerSpec | None = None,
    ):
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = Attention(config, qkv_bias, o_bias, tp, spec)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = MLP(config, tp)

    def forward(
        self,
        hidden: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        kv_cache: tuple[torch.Tensor, torch.Tensor],
        meta: AttentionMetadata,
        backend: AttentionBackend,
    ) -> torch.Tensor:
        residual = hidden
        hidden = self.self_attn(self.input_layernorm(hidden), cos, sin, kv_cache, meta, backend)
        hidden = residual + hidden
        residual = hidden
        hidden = self.mlp(self.post_attention_layernorm(hidden))
        return residual + hidden
