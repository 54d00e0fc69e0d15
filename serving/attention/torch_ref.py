"""Plain torch attention over the paged KV cache: the reference (and CPU) backend.

Written for clarity over speed: each sequence gathers its context from its block table and runs
causal SDPA on it. It is the oracle the GPU kernels are tested against.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from serving.attention.base import AttentionMetadata


class TorchRefBackend:
    name = "torch_ref"

    def write_kv(
        self,
        key: torch.Tensor,
        value: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> None:
        num_kv_heads, head_dim = k_cache.shape[-2:]
        keep = slot_mapping >= 0
        slots = slot_mapping[keep]
        k_cache.view(-1, num_kv_heads, head_dim)[slots] = key[keep].to(k_cache.dtype)
        v_cache.view(-1, num_kv_heads, head_dim)[slots] = value[keep].to(v_cache.dtype)

    def forward(
        self,
        query: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
        scale: float,
    ) -> torch.Tensor:
        num_heads = query.shape[1]
        block_size, num_kv_heads, head_dim = k_cache.shape[1:]
        group = num_heads // num_kv_heads
        qlens = meta.query_lens_cpu or (meta.query_start_loc[1:] - meta.query_start_loc[:-1]).tolist()
        slens = meta.seq_lens_cpu or meta.seq_lens.tolist()
        out = torch.empty_like(query)
        start = 0
        for i, (qlen, slen) in enumerate(zip(qlens, slens, strict=True)):
            nblocks = -(-slen // block_size)
            blocks = meta.block_tables[i, :nblocks].long()
            k = k_cache[blocks].reshape(-1, num_kv_heads, head_dim)[:slen]
            v = v_cache[blocks].reshape(-1, num_kv_heads, head_dim)[:slen]
            # [heads, tokens, dim]; GQA: each kv head serves `group` query heads
            k = k.to(query.dtype).transpose(0, 1).repeat_interleave(group, dim=0)
            v = v.to(query.dtype).transpose(0, 1).repeat_interleave(group, dim=0)
            q = query[start : start + qlen].transpose(0, 1)
            if qlen == 1:
                mask = None  # one query at the end of its context sees everything
            else:
                # query j sits at absolute position slen - qlen + j and sees keys 0..that position
                qpos = torch.arange(slen - qlen, slen, device=query.device)[:, None]
                mask = torch.arange(slen, device=query.device)[None, :] <= qpos
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
            out[start : start + qlen] = o.transpose(0, 1)
            start += qlen
        return out
