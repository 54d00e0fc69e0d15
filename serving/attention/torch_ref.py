"""Plain torch attention over the paged KV cache: the reference (and CPU) backend.

Written for clarity over speed: each sequence gathers its context from its block table and runs
causal SDPA on it; the leading decode rows (one query each) are done as one padded, masked batch
so a CPU decode step is not a Python loop over sequences. It is the oracle the GPU kernels are
tested against (tests/serving/test_model_attention.py checks it against brute force).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from serving.attention.base import AttentionMetadata
from serving.attention.fault import faulted_scale


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
        window: int | None = None,
        softcap: float | None = None,
        sinks: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """`sinks` (gpt-oss): one logit per query head [num_heads] joining each softmax."""
        scale = faulted_scale(scale, k_cache)  # test-only switch; a no-op unless set
        num_heads = query.shape[1]
        block_size, num_kv_heads, head_dim = k_cache.shape[1:]
        group = num_heads // num_kv_heads
        qlens = (
            meta.query_lens_cpu or (meta.query_start_loc[1:] - meta.query_start_loc[:-1]).tolist()
        )
        slens = meta.seq_lens_cpu or meta.seq_lens.tolist()
        out = torch.empty_like(query)
        # decode rows come first (one query each): one batched gather + SDPA for all of them
        num_decode = meta.num_decode_tokens
        if num_decode > 1:
            out[:num_decode] = self._decode_batch(
                query[:num_decode], k_cache, v_cache, meta, slens, scale, window, softcap, sinks
            )
        else:
            num_decode = 0
        start = num_decode
        for i, (qlen, slen) in enumerate(zip(qlens, slens, strict=True)):
            if i < num_decode:
                continue
            nblocks = -(-slen // block_size)
            blocks = meta.block_tables[i, :nblocks].long()
            k = k_cache[blocks].reshape(-1, num_kv_heads, head_dim)[:slen]
            v = v_cache[blocks].reshape(-1, num_kv_heads, head_dim)[:slen]
            # [heads, tokens, dim]; GQA: each kv head serves `group` query heads
            k = k.to(query.dtype).transpose(0, 1).repeat_interleave(group, dim=0)
            v = v.to(query.dtype).transpose(0, 1).repeat_interleave(group, dim=0)
            q = query[start : start + qlen].transpose(0, 1)
            if qlen == 1 and window is None:
                mask = None  # one query at the end of its context sees everything
            else:
                # query j sits at absolute position slen - qlen + j and sees keys 0..that position
                # (and, with a window, none at or before that position - window)
                qpos = torch.arange(slen - qlen, slen, device=query.device)[:, None]
                kpos = torch.arange(slen, device=query.device)[None, :]
                mask = kpos <= qpos
                if window is not None:
                    mask = mask & (kpos > qpos - window)
            sink = None if sinks is None else sinks.view(-1, 1, 1)
            o = attend(q, k, v, mask, scale, softcap, sink)
            out[start : start + qlen] = o.transpose(0, 1)
            start += qlen
        return out

    @staticmethod
    def _decode_batch(
        query: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
        slens: list[int],
        scale: float,
        window: int | None,
        softcap: float | None,
        sinks: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One query per sequence: gather every context padded to the longest, mask the padding.
        A kv head's `group` query heads ride in SDPA's query-length slot, so GQA needs no copy."""
        n, num_heads, head_dim = query.shape
        block_size, num_kv_heads = k_cache.shape[1:3]
        group = num_heads // num_kv_heads
        longest = max(slens[:n])
        nb = -(-longest // block_size)
        blocks = meta.block_tables[:n, :nb].reshape(-1).long()
        # whole blocks via index_select (one contiguous copy), then [n, kv_heads, tokens, dim] views
        k = k_cache.index_select(0, blocks).view(n, nb * block_size, num_kv_heads, head_dim)
        v = v_cache.index_select(0, blocks).view(n, nb * block_size, num_kv_heads, head_dim)
        k, v = k.transpose(1, 2).to(query.dtype), v.transpose(1, 2).to(query.dtype)
        lens = meta.seq_lens[:n].to(query.device)
        kpos = torch.arange(k.shape[2], device=query.device)[None, :]
        mask = kpos < lens[:, None]  # [n, padded]
        if window is not None:  # the query sits at lens - 1
            mask = mask & (kpos > lens[:, None] - 1 - window)
        q = query.reshape(n, num_kv_heads, group, head_dim)
        sink = None if sinks is None else sinks.view(1, num_kv_heads, group, 1)
        o = attend(q, k, v, mask[:, None, None, :], scale, softcap, sink)
        return o.reshape(n, num_heads, head_dim)


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    scale: float,
    softcap: float | None,
    sinks: torch.Tensor | None = None,
) -> torch.Tensor:
    """Masked softmax attention; with `softcap`, the scaled logits are capped first (HF's eager
    order: scale, cap, mask, float32 softmax). With `sinks` (broadcast to the logits' shape but
    the last dim, 1): each head's sink logit joins the softmax and its share is dropped (HF's
    gpt-oss eager order: the max subtracted, softmax in the logits' dtype)."""
    if softcap is None and sinks is None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    logits = torch.matmul(q, k.transpose(-1, -2)) * scale
    if softcap is not None:
        logits = torch.tanh(logits / softcap) * softcap
    if mask is not None:
        logits = logits.masked_fill(~mask, float("-inf"))
    if sinks is None:
        weights = torch.softmax(logits, dim=-1, dtype=torch.float32).to(q.dtype)
        return torch.matmul(weights, v)
    sink = sinks.to(logits.dtype).expand(*logits.shape[:-1], 1)
    combined = torch.cat([logits, sink], dim=-1)
    combined = combined - combined.amax(dim=-1, keepdim=True)
    weights = torch.softmax(combined, dim=-1, dtype=combined.dtype)[..., :-1]
    return torch.matmul(weights.to(v.dtype), v)
