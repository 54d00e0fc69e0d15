"""The Llama-family forward on GPU with fused kernels, over the model's own weights.

Same math and rounding order as `LlamaForCausalLM.forward` (serving/model), with the residual
add folded into the next RMSNorm, q/k norms reading the fused qkv in place, rotary applied in
place, and SiLU-and-mul in one kernel: q/k norm + rotary + KV write in one kernel (Triton backend):
per layer ~10 launches instead of ~60, which is what
decides batch-1 decode speed once CUDA graphs remove the launch gaps. With one token the
projections run as GEMVs (serving/kernels/gemv.py) and SiLU-and-mul is read inside the down
projection's GEMV.
"""

from __future__ import annotations

from typing import Any

import torch

from serving.attention.base import AttentionBackend, AttentionMetadata
from serving.kernels import gemv as gemv_kernels
from serving.kernels.fused_ops import rms_norm, rotary_inplace, silu_and_mul
from serving.kernels.linear import linear
from serving.kernels.qkv_rope_cache import qkv_rope_cache


def fused_forward(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    positions: torch.Tensor,
    kv_caches: list[tuple[torch.Tensor, torch.Tensor]],
    meta: AttentionMetadata,
    backend: AttentionBackend,
) -> torch.Tensor:
    """Final-norm hidden states [num_tokens, hidden] for the step, like `model(...)`."""
    # the model's parts are read by name: the plain and tensor-parallel Llama forms and any other
    # module laid out the same (serving/model) serve alike
    parts: Any = model
    n = input_ids.shape[0]
    hidden = parts.embed_tokens(input_ids)
    cos, sin = parts.rotary.cos_sin(positions, hidden.dtype)
    residual: torch.Tensor | None = None
    # the one-kernel prologue writes the cache itself: only for the Triton backend (same format)
    hd = parts.config.head_dim
    fused_prologue = getattr(backend, "name", "") == "triton" and hd >= 32 and not hd & (hd - 1)
    for layer, (k_cache, v_cache) in zip(parts.layers, kv_caches, strict=True):
        attn = layer.self_attn
        qkv, residual = _norm_project(attn.qkv_proj, layer.input_layernorm, hidden, residual)
        if fused_prologue:
            qn, kn = (attn.q_norm, attn.k_norm) if attn.qk_norm else (None, None)
            q = qkv_rope_cache(
                qkv,
                cos,
                sin,
                attn.num_heads,
                attn.num_kv_heads,
                attn.head_dim,
                k_cache,
                v_cache,
                meta.slot_mapping,
                None if qn is None else qn.weight,
                None if kn is None else kn.weight,
                1e-6 if qn is None else qn.eps,
                getattr(backend, "k_scale", 1.0),
                getattr(backend, "v_scale", 1.0),
            )
        else:
            q = _prologue_unfused(attn, qkv, n, cos, sin, k_cache, v_cache, meta, backend)
        sinks = {} if attn.sinks is None else {"sinks": attn.sinks}  # gpt-oss only
        out = backend.forward(
            q, k_cache, v_cache, meta, attn.scale, window=attn.sliding_window, **sinks
        )
        hidden = _project(attn.o_proj, out.view(n, attn.q_size))
        mlp = layer.mlp
        if hasattr(mlp, "router"):  # mixture of experts (serving/model/moe.py)
            norm = layer.post_attention_layernorm
            hidden = mlp(rms_norm(hidden, norm.weight, norm.eps, residual=residual))
            continue
        gate_up, residual = _norm_project(
            mlp.gate_up_proj, layer.post_attention_layernorm, hidden, residual
        )
        hidden = _down(mlp.down_proj, gate_up)
    final = parts.norm
    if residual is None:  # a model with no layers
        return rms_norm(hidden, final.weight, final.eps)
    return rms_norm(hidden, final.weight, final.eps, residual=residual)


def _project(module: Any, x: torch.Tensor) -> torch.Tensor:
    if isinstance(module, torch.nn.Linear):
        return linear(x, module.weight, module.bias)
    out: torch.Tensor = module(x)
    return out  # the tensor-parallel linears dispatch the same way themselves


def _norm_project(
    module: Any,
    norm: Any,
    hidden: torch.Tensor,
    residual: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """module(rms_norm(hidden + residual)) and the new residual (hidden itself when there is none
    yet); one GEMV kernel for one token (column-parallel or plain linears only)."""
    if (
        gemv_kernels.ENABLED
        and hidden.shape[-1] <= gemv_kernels.MAX_FUSED_NORM_FEATURES
        and gemv_kernels.gemv_applies(hidden, module.weight)
    ):
        return gemv_kernels.gemv_rms_norm(
            hidden, residual, norm.weight, norm.eps, module.weight, module.bias
        )
    if residual is None:
        return _project(module, rms_norm(hidden, norm.weight, norm.eps)), hidden
    return _project(module, rms_norm(hidden, norm.weight, norm.eps, residual=residual)), residual


def _down(module: Any, gate_up: torch.Tensor) -> torch.Tensor:
    """down_proj(silu(gate) * up), the activation read inside a one-token GEMV on short rows."""
    weight: torch.Tensor = module.weight
    if not (gemv_kernels.ENABLED and gemv_kernels.gemv_applies(gate_up, weight)):
        out: torch.Tensor = module(silu_and_mul(gate_up))
        return out
    if weight.shape[1] <= gemv_kernels.MAX_FUSED_SILU_FEATURES:
        partial = gemv_kernels.gemv_silu(gate_up, weight)
    else:
        partial = gemv_kernels.gemv(silu_and_mul(gate_up), weight)
    if hasattr(module, "reduce"):  # row-parallel: all-reduce, then the bias
        reduced: torch.Tensor = module.reduce(partial)
        return reduced
    return partial if module.bias is None else partial + module.bias


def _prologue_unfused(
    attn: Any,
    qkv: torch.Tensor,
    n: int,
    cos: torch.Tensor,
    sin: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    meta: AttentionMetadata,
    backend: AttentionBackend,
) -> torch.Tensor:
    """q/k norm, rotary and KV write as separate kernels (any backend)."""
    parts: tuple[torch.Tensor, ...] = qkv.split([attn.q_size, attn.kv_size, attn.kv_size], dim=-1)
    q, k, v = parts
    q = q.view(n, attn.num_heads, attn.head_dim)
    k = k.view(n, attn.num_kv_heads, attn.head_dim)
    v = v.view(n, attn.num_kv_heads, attn.head_dim)
    if attn.qk_norm:
        q = rms_norm(q, attn.q_norm.weight, attn.q_norm.eps)
        k = rms_norm(k, attn.k_norm.weight, attn.k_norm.eps)
    rotate(q, cos, sin)
    rotate(k, cos, sin)
    backend.write_kv(k, v, k_cache, v_cache, meta.slot_mapping)
    return q


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> None:
    """Rotary in place (HF rotate-half layout): the Triton kernel for the head sizes it takes
    (powers of two from 32), torch for the rest (small test models, odd widths)."""
    d = x.shape[-1]
    if d >= 32 and not d & (d - 1):
        rotary_inplace(x, cos, sin)
        return
    half = d // 2
    x1, x2 = x[..., :half].clone(), x[..., half:].clone()
    c, s = cos[:, None, :], sin[:, None, :]
    x[..., :half] = x1 * c[..., :half] - x2 * s[..., :half]
    x[..., half:] = x2 * c[..., half:] + x1 * s[..., half:]
