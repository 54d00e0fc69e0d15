"""The Triton attention backend (CUDA): the same two calls as the torch reference, on GPU kernels.

Decode rows (sequences with one query token; the runner lays them out first) go to the split-K
GQA decode kernel; the rest of the step (prefill chunks, prefix hits) to the paged prefill
kernel, both in one output tensor. FP8 (float8_e4m3fn) caches are detected from the cache dtype
and read/written with per-tensor scales `k_scale`/`v_scale` (stored value = x / scale).
`serving.attention.get_backend` serves it for "cuda" where Triton is installed; the module
imports without Triton.
"""

from __future__ import annotations

from typing import TypedDict

import torch

from serving.attention.base import AttentionMetadata
from serving.attention.fault import faulted_scale
from serving.kernels import HAS_TRITON
from serving.kernels.kv_write import write_kv
from serving.kernels.paged_decode import paged_decode
from serving.kernels.paged_prefill import paged_prefill


class _Scales(TypedDict):
    """What both kernels take besides the step's tensors."""

    k_scale: float
    v_scale: float
    window: int | None
    softcap: float | None
    sinks: torch.Tensor | None


def _leading_decodes(meta: AttentionMetadata) -> int:
    if meta.is_decode_only:
        return meta.num_seqs
    if meta.num_decode_tokens:
        return meta.num_decode_tokens
    n = 0
    for q in meta.query_lens_cpu or []:
        if q != 1:
            break
        n += 1
    return n


class TritonAttentionBackend:
    name = "triton"

    def __init__(self, k_scale: float = 1.0, v_scale: float = 1.0):
        if not HAS_TRITON:
            raise RuntimeError("the Triton attention backend needs the `triton` package")
        if k_scale <= 0 or v_scale <= 0:
            raise ValueError(
                f"KV scales must be positive, got k_scale={k_scale}, v_scale={v_scale}"
            )
        self.k_scale = float(k_scale)
        self.v_scale = float(v_scale)

    def write_kv(
        self,
        key: torch.Tensor,
        value: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> None:
        write_kv(key, value, k_cache, v_cache, slot_mapping, self.k_scale, self.v_scale)

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
        scale = faulted_scale(scale, k_cache)  # test-only switch; a no-op unless set
        out = torch.empty(query.shape, dtype=query.dtype, device=query.device)
        num_seqs = meta.num_seqs
        scales = _Scales(
            k_scale=self.k_scale, v_scale=self.v_scale, window=window, softcap=softcap, sinks=sinks
        )
        if meta.decode_seq_lens is not None:  # a prefill graph: decode rows anywhere, then the rest
            assert meta.decode_rows is not None  # set with decode_seq_lens
            paged_decode(
                query,
                k_cache,
                v_cache,
                meta.block_tables,
                meta.decode_seq_lens,
                meta.decode_rows,
                out,
                scale,
                meta.max_seq_len,
                **scales,
            )
            paged_prefill(
                query,
                k_cache,
                v_cache,
                meta.block_tables,
                meta.seq_lens,
                meta.query_start_loc,
                out,
                scale,
                meta.max_query_len,
                skip_single=True,
                **scales,
            )
            return out
        nd = _leading_decodes(meta)
        if nd:
            paged_decode(
                query,
                k_cache,
                v_cache,
                meta.block_tables[:nd],
                meta.seq_lens[:nd],
                meta.query_start_loc[:nd],
                out,
                scale,
                meta.max_seq_len,
                **scales,
            )
        if nd < num_seqs:
            paged_prefill(
                query,
                k_cache,
                v_cache,
                meta.block_tables[nd:],
                meta.seq_lens[nd:],
                meta.query_start_loc[nd:],
                out,
                scale,
                meta.max_query_len,
                **scales,
            )
        return out
