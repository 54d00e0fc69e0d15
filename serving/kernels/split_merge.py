"""The second kernel of split-K paged decode: merge each head's per-split partial outputs by
log-sum-exp into the final output row.

Split s of a head wrote its output normalised over its own keys, `part_out[s]`, and the base-2
log-sum-exp of its logits, `part_lse[s]` (-inf for a split that saw no key). The merged output is
sum_s 2^(lse_s - m) part_out[s] / sum_s 2^(lse_s - m). With SINKS (gpt-oss) the head's sink
logit enters here, once, as one more split whose output is zero: it adds to the denominator
only. Grid (num_seqs, num_q_heads).
"""

import torch

from serving.kernels._compat import tl, triton
from serving.kernels.pdl import launch_next, wait_for_prior


@triton.jit
def _merge_kernel(  # type: ignore[no-untyped-def]  # Triton kernel
    part_out_ptr,
    part_lse_ptr,
    qsl_ptr,
    out_ptr,
    sinks_ptr,
    o_stride_t,
    o_stride_h,
    num_q_heads,
    HEAD_DIM: tl.constexpr,
    D_PAD: tl.constexpr,
    NUM_SPLITS: tl.constexpr,
    S_PAD: tl.constexpr,
    USE_PDL: tl.constexpr,
    SINKS: tl.constexpr,
):
    launch_next(USE_PDL)
    wait_for_prior(USE_PDL)
    seq = tl.program_id(0)
    h = tl.program_id(1)
    q_row = tl.load(qsl_ptr + seq).to(tl.int64)
    offs_s = tl.arange(0, S_PAD)
    offs_d = tl.arange(0, D_PAD)
    s_mask = offs_s < NUM_SPLITS
    d_mask = offs_d < HEAD_DIM
    base = (seq.to(tl.int64) * num_q_heads + h) * NUM_SPLITS
    lse = tl.load(part_lse_ptr + base + offs_s, mask=s_mask, other=float("-inf"))
    m = tl.max(lse, 0)
    if SINKS:  # the sink as one more split: log-sum-exp its logit, output zero
        sink_l2 = tl.load(sinks_ptr + h).to(tl.float32) * 1.4426950408889634
        m = tl.maximum(m, sink_l2)
    m = tl.where(m == float("-inf"), 0.0, m)
    w = tl.exp2(lse - m)
    o = tl.load(
        part_out_ptr + (base + offs_s)[:, None] * HEAD_DIM + offs_d[None, :],
        mask=s_mask[:, None] & d_mask[None, :],
        other=0.0,
    )
    denom = tl.sum(w, 0)
    if SINKS:
        denom += tl.exp2(sink_l2 - m)
    denom = tl.where(denom == 0.0, 1.0, denom)
    out = tl.sum(o * w[:, None], 0) / denom
    tl.store(
        out_ptr + q_row * o_stride_t + h * o_stride_h + offs_d,
        out.to(out_ptr.dtype.element_ty),
        mask=d_mask,
    )


def merge_splits(
    part_out: torch.Tensor,
    part_lse: torch.Tensor,
    query_start_loc: torch.Tensor,
    out: torch.Tensor,
    sinks: torch.Tensor | None,
    use_pdl: bool,
) -> None:
    """part_out [num_seqs, num_q_heads, num_splits, head_dim] and part_lse [num_seqs,
    num_q_heads, num_splits] (float32) into out's row query_start_loc[i] of each sequence i."""
    num_seqs, num_q_heads, num_splits, head_dim = part_out.shape
    _merge_kernel[(num_seqs, num_q_heads)](
        part_out,
        part_lse,
        query_start_loc,
        out,
        out if sinks is None else sinks,  # never read without SINKS
        out.stride(0),
        out.stride(1),
        num_q_heads,
        HEAD_DIM=head_dim,
        D_PAD=triton.next_power_of_2(head_dim),
        NUM_SPLITS=num_splits,
        S_PAD=max(2, triton.next_power_of_2(num_splits)),
        USE_PDL=use_pdl,
        SINKS=sinks is not None,
        num_warps=4,
        launch_pdl=use_pdl,
    )
