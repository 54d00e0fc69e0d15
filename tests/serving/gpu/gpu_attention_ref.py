"""Test helpers: random paged-cache cases and an independent float32 attention reference.

The reference gathers each sequence's context through its block table and does explicit
softmax(QK^T * scale) V in float32 with a causal mask: no SDPA, no shared code with the kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from serving.attention.base import AttentionMetadata


@dataclass
class PagedCase:
    query: torch.Tensor  # [T, Hq, D]
    k_cache: torch.Tensor  # [NB, BS, Hk, D]
    v_cache: torch.Tensor
    meta: AttentionMetadata
    query_lens: list[int]
    seq_lens: list[int]


def make_case(
    specs: list[tuple[int, int]],  # (tokens already in cache before the queries, query_len)
    num_q_heads: int,
    num_kv_heads: int,
    head_dim: int,
    *,
    block_size: int = 16,
    dtype: torch.dtype = torch.bfloat16,
    seed: int = 0,
    extra_blocks: int = 7,
) -> PagedCase:
    """A step whose whole context (prefix + this step's tokens) already sits in the cache, in
    randomly permuted blocks, as it does after `write_kv`."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    seq_lens = [ctx + q for ctx, q in specs]
    query_lens = [q for _, q in specs]
    blocks_needed = [-(-s // block_size) for s in seq_lens]
    num_blocks = sum(blocks_needed) + extra_blocks
    perm = torch.randperm(num_blocks, generator=g).tolist()
    width = max(blocks_needed)
    tables = torch.zeros(len(specs), width, dtype=torch.int32)
    used = 0
    for i, nb in enumerate(blocks_needed):
        tables[i, :nb] = torch.tensor(perm[used : used + nb], dtype=torch.int32)
        used += nb
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k_cache = torch.randn(shape, generator=g).to(dtype)
    v_cache = torch.randn(shape, generator=g).to(dtype)
    total_q = sum(query_lens)
    query = torch.randn(total_q, num_q_heads, head_dim, generator=g).to(dtype)
    qsl = [0]
    for q in query_lens:
        qsl.append(qsl[-1] + q)
    slots = []
    for i, (ctx, q) in enumerate(specs):
        for p in range(ctx, ctx + q):
            slots.append(int(tables[i, p // block_size]) * block_size + p % block_size)
    num_decode = 0
    while num_decode < len(query_lens) and query_lens[num_decode] == 1:
        num_decode += 1
    dev = "cuda"
    meta = AttentionMetadata(
        query_start_loc=torch.tensor(qsl, dtype=torch.int32, device=dev),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=dev),
        slot_mapping=torch.tensor(slots, dtype=torch.int64, device=dev),
        block_tables=tables.to(dev),
        max_query_len=max(query_lens),
        max_seq_len=max(seq_lens),
        num_decode_tokens=num_decode,
        query_lens_cpu=query_lens,
        seq_lens_cpu=seq_lens,
    )
    return PagedCase(query.to(dev), k_cache.to(dev), v_cache.to(dev), meta, query_lens, seq_lens)


def reference_attention(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    meta: AttentionMetadata,
    scale: float,
    k_scale: float = 1.0,
    v_scale: float = 1.0,
) -> torch.Tensor:
    """float32 [T, Hq, D]; FP8 caches are dequantized as value * scale."""
    block_size, num_kv_heads, head_dim = k_cache.shape[1:]
    group = query.shape[1] // num_kv_heads
    out = torch.empty(query.shape, dtype=torch.float32, device=query.device)
    tables = meta.block_tables.long()
    start = 0
    for i, (qlen, slen) in enumerate(zip(meta.query_lens_cpu, meta.seq_lens_cpu, strict=True)):
        pos = torch.arange(slen, device=query.device)
        blocks = tables[i, pos // block_size]
        k = k_cache[blocks, pos % block_size].float() * k_scale  # [S, Hk, D]
        v = v_cache[blocks, pos % block_size].float() * v_scale
        k = k.repeat_interleave(group, dim=1)  # [S, Hq, D]
        v = v.repeat_interleave(group, dim=1)
        q = query[start : start + qlen].float()  # [Q, Hq, D]
        scores = torch.einsum("qhd,shd->hqs", q, k) * scale
        qpos = torch.arange(slen - qlen, slen, device=query.device)
        scores = scores.masked_fill(pos[None, None, :] > qpos[None, :, None], float("-inf"))
        probs = scores.softmax(-1)
        out[start : start + qlen] = torch.einsum("hqs,shd->qhd", probs, v)
        start += qlen
    return out


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref.float()).norm() / ref.float().norm().clamp_min(1e-12))


def per_seq_rel_errors(out: torch.Tensor, ref: torch.Tensor, query_lens: list[int]) -> list[float]:
    errs, start = [], 0
    for q in query_lens:
        errs.append(rel_error(out[start : start + q], ref[start : start + q]))
        start += q
    return errs
