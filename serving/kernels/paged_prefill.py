"""Prefill / chunked-prefill attention over the paged KV cache (prefix-cache hits included).

Runs after this step's K/V were written into the cache, so every key, whether from an earlier
chunk, a prefix-cache hit or this step, is read from the paged cache through the block table.
Query row r of sequence i sits at absolute position `seq_len - query_len + r` and attends
causally to keys 0..that position.

Grid (tile slots, num_q_heads), flat over the step's query tiles as in vLLM's unified attention:
sequence i owns slots from `(qsl[i] - qsl[0]) // BLOCK_M + i`, which leaves room for its
`cdiv(query_len, BLOCK_M)` tiles, and a program finds its sequence by binary search. The slot
count, `num_tokens // BLOCK_M + num_seqs`, depends on no per-sequence length, so one launch
serves any mix of prompt chunks and decode rows of a padded step replayed from a CUDA graph
(serving/engine/worker/cuda_graphs.py); zero-length sequences own empty slots and exit at once.
With SINKS (gpt-oss) the head's sink logit joins each row's softmax denominator
(serving/kernels/paged_kv.py `normalise`).
"""

import torch

from serving.kernels._compat import RUNTIME_ARGS, require_triton, tl, triton
from serving.kernels.paged_kv import attend_paged_kv, normalise

LOG2E = 1.4426950408889634
MAX_HEAD_DIM = 512


# Per-step values are not specialised on: a block-table width, a row offset or a sequence count
# of another alignment class would otherwise compile a new variant inside a serving step (~0.4 s).
@triton.jit(do_not_specialize=[*RUNTIME_ARGS, "num_seqs"])
def _prefill_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    block_tables_ptr,
    seq_lens_ptr,
    qsl_ptr,
    out_ptr,
    sinks_ptr,
    qk_scale,
    k_scale,
    v_scale,
    q_stride_t,
    q_stride_h,
    o_stride_t,
    o_stride_h,
    bt_stride,
    c_stride_blk,
    c_stride_tok,
    c_stride_head,
    block_size,
    num_seqs,
    window,
    softcap_l2,
    GROUP: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    D_PAD: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    FP8: tl.constexpr,
    SKIP_SINGLE: tl.constexpr,
    WINDOW: tl.constexpr,
    SOFTCAP: tl.constexpr,
    SINKS: tl.constexpr,
):
    slot = tl.program_id(0)
    h = tl.program_id(1)
    q_first = tl.load(qsl_ptr)
    # the last sequence whose first slot is at or before this one (slot starts strictly increase)
    lo = 0
    hi = num_seqs - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        starts_before = (tl.load(qsl_ptr + mid) - q_first) // BLOCK_M + mid <= slot
        lo = tl.where(starts_before, mid, lo)
        hi = tl.where(starts_before, hi, mid - 1)
    seq = lo
    q_start = tl.load(qsl_ptr + seq)
    tile = slot - ((q_start - q_first) // BLOCK_M + seq)
    q_len = tl.load(qsl_ptr + seq + 1) - q_start
    done = tile * BLOCK_M >= q_len
    if SKIP_SINGLE:  # the decode kernel answered the one-token queries
        done = done | (q_len == 1)
    if done:
        return
    seq_len = tl.load(seq_lens_ptr + seq)
    ctx = seq_len - q_len
    kvh = h // GROUP

    offs_m = tile * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D_PAD)
    m_mask = offs_m < q_len
    d_mask = offs_d < HEAD_DIM
    q_pos = ctx + offs_m
    rows = (q_start + offs_m).to(tl.int64)
    q = tl.load(
        q_ptr + rows[:, None] * q_stride_t + h * q_stride_h + offs_d[None, :],
        mask=m_mask[:, None] & d_mask[None, :],
        other=0.0,
    )

    # keys past the tile's last query position are causally invisible to every row of the tile
    kv_end = tl.minimum(seq_len, ctx + (tile + 1) * BLOCK_M)
    # and, with a window, keys before the tile's first row's window are invisible to all of it
    kv_start = 0
    if WINDOW:
        kv_start = tl.maximum(ctx + tile * BLOCK_M - window + 1, 0)
    bt_row = block_tables_ptr + seq.to(tl.int64) * bt_stride
    m_i, l_i, acc = attend_paged_kv(
        q,
        bt_row,
        k_cache_ptr,
        v_cache_ptr,
        kvh * c_stride_head,
        kv_start,
        kv_end,
        q_pos,
        qk_scale,
        k_scale,
        v_scale,
        block_size,
        c_stride_blk,
        c_stride_tok,
        offs_d,
        d_mask,
        window,
        softcap_l2,
        ROWS=BLOCK_M,
        D_PAD=D_PAD,
        BLOCK_N=BLOCK_N,
        CAUSAL=True,
        FP8=FP8,
        WINDOW=WINDOW,
        SOFTCAP=SOFTCAP,
    )

    sink_l2 = 0.0
    if SINKS:  # times log2(e): the kernel's base-2 logits
        sink_l2 = tl.load(sinks_ptr + h).to(tl.float32) * 1.4426950408889634
    out = normalise(m_i, l_i, acc, sink_l2, SINKS)
    tl.store(
        out_ptr + rows[:, None] * o_stride_t + h * o_stride_h + offs_d[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=m_mask[:, None] & d_mask[None, :],
    )


def paged_prefill(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    query_start_loc: torch.Tensor,
    out: torch.Tensor,
    scale: float,
    max_query_len: int,
    k_scale: float = 1.0,
    v_scale: float = 1.0,
    skip_single: bool = False,
    window: int | None = None,
    softcap: float | None = None,
    sinks: torch.Tensor | None = None,
) -> torch.Tensor:
    """Causal attention of each sequence's query rows over its paged context, written into `out`.
    `window`: a row at position q sees keys q - window < k <= q only; `softcap`: the scaled
    logits capped to cap * tanh(logits / cap); `sinks` [num_q_heads]: each head's sink logit
    joins its softmax denominator (gpt-oss). Head dims up to 512 (wide heads take narrower
    tiles, one stage: K and V tiles of 512-wide heads would not fit shared memory otherwise).

    Handles any query length (decode rows too, only less efficiently than `paged_decode`).
    `query_start_loc` [num_seqs + 1] holds absolute row offsets into query/out, so a caller may
    pass a slice of the step's sequences. `max_query_len` picks the tile height only (a bound
    on every sequence's query length: a CUDA graph passes its padded token count).
    `skip_single`: leave sequences with one query row alone (the decode kernel's).
    """
    require_triton()
    num_seqs = seq_lens.shape[0]
    _, num_q_heads, head_dim = query.shape
    _, block_size, num_kv_heads, _ = k_cache.shape
    if num_q_heads % num_kv_heads:
        raise ValueError(f"{num_q_heads} query heads are not a multiple of {num_kv_heads} KV heads")
    if query.stride(2) != 1 or out.stride(2) != 1:
        raise ValueError("query and out need a contiguous head_dim")
    if sinks is not None and sinks.shape != (num_q_heads,):
        raise ValueError(f"sinks of shape {tuple(sinks.shape)}, expected ({num_q_heads},)")
    if num_seqs == 0 or max_query_len == 0:
        return out
    if head_dim > MAX_HEAD_DIM:
        raise ValueError(f"head_dim {head_dim} is past the kernel's {MAX_HEAD_DIM}")
    block_m = 64 if max_query_len > 16 else 16
    block_n, warps, stages = 64, 4, 2
    if head_dim > 256:
        block_m, block_n, warps, stages = min(block_m, 32), 32, 8, 1
    elif head_dim > 128:
        block_n, warps = 32, 8
    grid = (query.shape[0] // block_m + num_seqs, num_q_heads)
    _prefill_kernel[grid](
        query,
        k_cache,
        v_cache,
        block_tables,
        seq_lens,
        query_start_loc,
        out,
        query if sinks is None else sinks,  # never read without SINKS
        scale * LOG2E,
        k_scale,
        v_scale,
        query.stride(0),
        query.stride(1),
        out.stride(0),
        out.stride(1),
        block_tables.stride(0),
        k_cache.stride(0),
        k_cache.stride(1),
        k_cache.stride(2),
        block_size,
        num_seqs,
        int(window or 0),
        float(softcap or 1.0) * LOG2E,
        GROUP=num_q_heads // num_kv_heads,
        HEAD_DIM=head_dim,
        D_PAD=triton.next_power_of_2(head_dim),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        FP8=k_cache.dtype == torch.float8_e4m3fn,
        SKIP_SINGLE=skip_single,
        WINDOW=window is not None,
        SOFTCAP=softcap is not None,
        SINKS=sinks is not None,
        num_warps=warps,
        num_stages=stages,
    )
    return out
