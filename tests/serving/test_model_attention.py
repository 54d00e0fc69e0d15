"""The torch reference attention backend (the oracle for GPU kernels) against a brute-force
float64 softmax(QK^T)V over each sequence's contiguous context, for a mixed step: decodes, a
fresh prefill and a prefill chunk continuing cached context; GQA; scattered block tables."""

from __future__ import annotations

import math

import pytest
import torch

from serving.attention import get_backend
from serving.attention.base import AttentionMetadata
from serving.attention.torch_ref import TorchRefBackend


@pytest.mark.parametrize("num_decode_tokens", [2, 0])  # batched decode fast path, and per-sequence
def test_paged_attention_matches_dense_brute_force(num_decode_tokens):
    g = torch.Generator().manual_seed(0)
    heads, kv_heads, dim, bs, nblocks = 6, 2, 8, 4, 40
    # (context already cached, new query tokens): two decodes, a fresh prefill, a chunk
    shapes = [(9, 1), (3, 1), (0, 7), (10, 5)]
    k_cache = torch.zeros(nblocks, bs, kv_heads, dim)
    v_cache = torch.zeros(nblocks, bs, kv_heads, dim)
    free = torch.randperm(nblocks, generator=g).tolist()  # scattered, out-of-order blocks
    tables, dense_k, dense_v, queries, slots = [], [], [], [], []
    backend = TorchRefBackend()
    for cached, new in shapes:
        total = cached + new
        table = [free.pop() for _ in range(-(-total // bs))]
        tables.append(table)
        k = torch.randn(total, kv_heads, dim, generator=g)
        v = torch.randn(total, kv_heads, dim, generator=g)
        dense_k.append(k)
        dense_v.append(v)
        slot = torch.tensor([table[t // bs] * bs + t % bs for t in range(total)])
        backend.write_kv(k[:cached], v[:cached], k_cache, v_cache, slot[:cached])  # earlier steps
        slots.append(slot[cached:])
        queries.append(torch.randn(new, heads, dim, generator=g))
    new_k = torch.cat([k[c:] for k, (c, _) in zip(dense_k, shapes, strict=True)])
    new_v = torch.cat([v[c:] for v, (c, _) in zip(dense_v, shapes, strict=True)])
    slot_mapping = torch.cat(slots)
    slot_mapping = torch.cat([slot_mapping, torch.tensor([-1])])  # a padding row: never written
    new_k = torch.cat([new_k, torch.full((1, kv_heads, dim), 1e9)])
    new_v = torch.cat([new_v, torch.full((1, kv_heads, dim), 1e9)])
    backend.write_kv(new_k, new_v, k_cache, v_cache, slot_mapping)
    width = max(map(len, tables))
    qlens = [n for _, n in shapes]
    slens = [c + n for c, n in shapes]
    meta = AttentionMetadata(
        query_start_loc=torch.tensor(
            [0, *torch.tensor(qlens).cumsum(0).tolist()], dtype=torch.int32
        ),
        seq_lens=torch.tensor(slens, dtype=torch.int32),
        slot_mapping=slot_mapping[:-1],
        block_tables=torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.int32),
        max_query_len=max(qlens),
        max_seq_len=max(slens),
        num_decode_tokens=num_decode_tokens,
    )
    scale = 1 / math.sqrt(dim)
    out = backend.forward(torch.cat(queries), k_cache, v_cache, meta, scale)
    assert out.shape == (sum(qlens), heads, dim)
    row = 0
    for (cached, new), q, k, v in zip(shapes, queries, dense_k, dense_v, strict=True):
        for j in range(new):
            pos = cached + j  # sees keys 0..pos
            for h in range(heads):
                kh = h // (heads // kv_heads)
                scores = (k[: pos + 1, kh].double() @ q[j, h].double()) * scale
                ref = torch.softmax(scores, 0) @ v[: pos + 1, kh].double()
                torch.testing.assert_close(out[row + j, h].double(), ref, atol=1e-5, rtol=1e-5)
        row += new


def test_cpu_gets_the_reference_backend():
    assert get_backend("cpu").name == "torch_ref"
