"""Paged decode attention: one query token per sequence, GQA-aware, split-K over the context.

Grid (num_seqs, num_kv_heads, num_splits). A program loads the query rows of *all* query heads
that share its KV head (padded to 16 rows so the tensor cores take them) and streams that KV
head's keys/values once, so each cached byte is read once per step, not once per query head.
Long contexts are cut into `num_splits` contiguous ranges that run in parallel; a second kernel
merges their partial results by log-sum-exp (serving/kernels/split_merge.py). The split count
depends only on the batch shape and a context-length hint (never on device values), so
CUDA-graph capture sees a fixed grid; each program derives its actual range from the sequence's
length read on the device. With SINKS (gpt-oss) each head's sink logit joins the softmax
denominator once: here when unsplit, else in the merge (a split's partial result and
log-sum-exp cover its own keys only).
"""

import torch

from serving.kernels import pdl
from serving.kernels._compat import RUNTIME_ARGS, require_triton, tl, triton
from serving.kernels.paged_kv import attend_paged_kv, load_sink_l2, normalise
from serving.kernels.pdl import launch_next, wait_for_prior
from serving.kernels.sm_count import sm_count
from serving.kernels.split_merge import merge_splits

LOG2E = 1.4426950408889634
DECODE_BLOCK_N = 64
MAX_SPLITS = 64  # a sequence's context is split over at most this many programs


# Per-step values are not specialised on: a block-table width or a row offset of another
# alignment class would otherwise compile a new variant inside a serving step (~0.4 s).
@triton.jit(do_not_specialize=RUNTIME_ARGS)
def _decode_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    block_tables_ptr,
    seq_lens_ptr,
    qsl_ptr,
    out_ptr,
    part_out_ptr,
    part_lse_ptr,
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
    num_q_heads,
    window,
    softcap_l2,
    GROUP: tl.constexpr,
    GROUP_PAD: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    D_PAD: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NUM_SPLITS: tl.constexpr,
    FP8: tl.constexpr,
    USE_PDL: tl.constexpr,
    WINDOW: tl.constexpr,
    SOFTCAP: tl.constexpr,
    SINKS: tl.constexpr,
):
    launch_next(USE_PDL)
    wait_for_prior(USE_PDL)
    seq = tl.program_id(0)
    kvh = tl.program_id(1)
    split = tl.program_id(2)
    seq_len = tl.load(seq_lens_ptr + seq)
    q_row = tl.load(qsl_ptr + seq).to(tl.int64)

    # the query sits at seq_len - 1; with a window it sees keys first..seq_len-1 only, and the
    # splits share that range (blocks before it may have been freed: never read)
    first = 0
    if WINDOW:
        first = tl.maximum(seq_len - window, 0)
    num_tiles = tl.cdiv(seq_len - first, BLOCK_N)
    tiles_per_split = tl.cdiv(num_tiles, NUM_SPLITS)
    start = first + split * tiles_per_split * BLOCK_N
    end = tl.minimum(start + tiles_per_split * BLOCK_N, seq_len)

    offs_g = tl.arange(0, GROUP_PAD)
    offs_d = tl.arange(0, D_PAD)
    g_mask = offs_g < GROUP
    d_mask = offs_d < HEAD_DIM
    heads = kvh * GROUP + offs_g
    q = tl.load(
        q_ptr + q_row * q_stride_t + heads[:, None] * q_stride_h + offs_d[None, :],
        mask=g_mask[:, None] & d_mask[None, :],
        other=0.0,
    )

    bt_row = block_tables_ptr + seq.to(tl.int64) * bt_stride
    m_i, l_i, acc = attend_paged_kv(
        q,
        bt_row,
        k_cache_ptr,
        v_cache_ptr,
        kvh * c_stride_head,
        start,
        end,
        offs_g,
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
        ROWS=GROUP_PAD,
        D_PAD=D_PAD,
        BLOCK_N=BLOCK_N,
        CAUSAL=False,
        FP8=FP8,
        WINDOW=False,  # the range above is the window already
        SOFTCAP=SOFTCAP,
    )

    # an empty range (short context, or a padded graph slot with seq_len 0) has l_i == 0
    st_mask = g_mask[:, None] & d_mask[None, :]
    if NUM_SPLITS == 1:
        sink_l2 = load_sink_l2(sinks_ptr, heads, g_mask, SINKS)
        out = normalise(m_i, l_i, acc, sink_l2, SINKS)
        o_ptrs = out_ptr + q_row * o_stride_t + heads[:, None] * o_stride_h + offs_d[None, :]
        tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=st_mask)
    else:  # the merge adds the sink, once
        out = normalise(m_i, l_i, acc, 0.0, False)
        part = (seq.to(tl.int64) * num_q_heads + heads) * NUM_SPLITS + split
        tl.store(part_out_ptr + part[:, None] * HEAD_DIM + offs_d[None, :], out, mask=st_mask)
        safe_l = tl.where(l_i == 0.0, 1.0, l_i)
        lse = tl.where(l_i == 0.0, float("-inf"), m_i + tl.log2(safe_l))
        tl.store(part_lse_ptr + part, lse, mask=g_mask)


def decode_launch(head_dim: int, num_splits: int) -> tuple[int, int, int]:
    """(BLOCK_N, warps, stages) of the decode kernel. Split programs of 64-wide heads hold few
    key tiles: 128-key tiles in one stage halve their loop (SmolLM2, 64 sequences at context 386:
    9.6 against 12.3 us; unsplit launches measured no better, bench/results/decode_tuning.md).
    Heads past 256 take 32-key tiles in one stage (K and V tiles of 512-wide heads would not fit
    shared memory otherwise)."""
    if head_dim > 256:
        return 32, 8, 1
    if head_dim > 128:
        return 32, 4, 2
    if head_dim <= 64 and num_splits > 1:
        return 128, 4, 1
    return DECODE_BLOCK_N, 4, 2


def choose_num_splits(
    num_seqs: int, num_kv_heads: int, max_seq_len: int, device: torch.device | None = None
) -> int:
    """Power-of-two split count: enough programs to fill the GPU (two waves over its SMs), at
    least one tile per split."""
    programs = max(1, num_seqs * num_kv_heads)
    max_tiles = max(1, triton.cdiv(max_seq_len, DECODE_BLOCK_N))
    target = 2 * sm_count(device)
    splits = 1
    while programs * splits < target and splits * 2 <= min(max_tiles, MAX_SPLITS):
        splits *= 2
    return splits


def paged_decode(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    query_start_loc: torch.Tensor,
    out: torch.Tensor,
    scale: float,
    max_seq_len: int,
    k_scale: float = 1.0,
    v_scale: float = 1.0,
    num_splits: int | None = None,
    launch: tuple[int, int, int] | None = None,
    window: int | None = None,
    softcap: float | None = None,
    sinks: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention for sequences with one query token each, written into `out` (same layout as query).

    query/out: [num_tokens, num_q_heads, head_dim]; the query row of sequence i is
    query_start_loc[i]. Caches: [num_blocks, block_size, num_kv_heads, head_dim] (bf16/fp16 or
    float8_e4m3fn with k_scale/v_scale). `max_seq_len` is only a hint that picks the split count;
    `launch` (BLOCK_N, warps, stages) overrides `decode_launch`
    (bench/suites/bench_decode_tuning.py).
    `window`: the query (at seq_len - 1) sees the last `window` keys only; `softcap`: the scaled
    logits capped to cap * tanh(logits / cap); `sinks` [num_q_heads]: each head's sink logit
    joins its softmax denominator (gpt-oss). Head dims up to 512.
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
    if num_seqs == 0:
        return out
    group = num_q_heads // num_kv_heads
    if head_dim > 512:
        raise ValueError(f"head_dim {head_dim} is past the kernel's 512")
    if num_splits is None:
        context = max_seq_len if window is None else min(max_seq_len, window)
        num_splits = choose_num_splits(num_seqs, num_kv_heads, context, query.device)
    d_pad = triton.next_power_of_2(head_dim)
    block_n, num_warps, num_stages = launch or decode_launch(head_dim, num_splits)
    if num_splits > 1:
        part_out = torch.empty(
            (num_seqs, num_q_heads, num_splits, head_dim), dtype=torch.float32, device=query.device
        )
        part_lse = torch.empty(
            (num_seqs, num_q_heads, num_splits), dtype=torch.float32, device=query.device
        )
    else:
        part_out = part_lse = out  # unused by the kernel when NUM_SPLITS == 1
    use_pdl = pdl.enabled(query.device)
    _decode_kernel[(num_seqs, num_kv_heads, num_splits)](
        query,
        k_cache,
        v_cache,
        block_tables,
        seq_lens,
        query_start_loc,
        out,
        part_out,
        part_lse,
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
        num_q_heads,
        int(window or 0),
        float(softcap or 1.0) * LOG2E,
        GROUP=group,
        GROUP_PAD=max(16, triton.next_power_of_2(group)),
        HEAD_DIM=head_dim,
        D_PAD=d_pad,
        BLOCK_N=block_n,
        NUM_SPLITS=num_splits,
        FP8=k_cache.dtype == torch.float8_e4m3fn,
        USE_PDL=use_pdl,
        WINDOW=window is not None,
        SOFTCAP=softcap is not None,
        SINKS=sinks is not None,
        num_warps=num_warps,
        num_stages=num_stages,
        launch_pdl=use_pdl,
    )
    if num_splits > 1:
        merge_splits(part_out, part_lse, query_start_loc, out, sinks, use_pdl)
    return out
