"""The loop the paged attention kernels share: stream one KV head's keys and values from the
paged cache through a sequence's block table and fold them into running softmax statistics
(online softmax, base 2: `qk_scale` carries log2(e)).

`paged_decode` runs it over one split of a sequence's context for the query heads of a KV head;
`paged_prefill` over the keys causally visible to one tile of query rows. With WINDOW a row at
position q sees only keys q - window < k <= q (the callers also start the loop at the first key
any row of theirs can see, so blocks freed out of the window are never read); with SOFTCAP the
scaled logits are capped: cap * tanh(logits / cap) (`softcap_l2` = cap * log2(e), since the
logits carry log2(e) here). Inlined into each
kernel by Triton, so it costs nothing at run time.

`normalise` ends a range: acc / l. With SINKS (gpt-oss) a per-head sink logit joins the
denominator only, as one more key whose value is zero: out = sum_j e^s_j v_j / (e^sink +
sum_j e^s_j). Without SINKS it compiles to the division alone.
"""

from serving.kernels._compat import tl, triton


@triton.jit
def attend_paged_kv(
    q,
    bt_row,
    k_cache_ptr,
    v_cache_ptr,
    head_off,
    start,
    end,
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
    ROWS: tl.constexpr,
    D_PAD: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    FP8: tl.constexpr,
    WINDOW: tl.constexpr,
    SOFTCAP: tl.constexpr,
):
    """Keys start..end-1 against the `ROWS` query rows `q`; returns (row max, row sum, unnormalised
    output). With CAUSAL a row sees only keys at or before its position `q_pos`."""
    m_i = tl.full([ROWS], float("-inf"), tl.float32)
    l_i = tl.zeros([ROWS], tl.float32)
    acc = tl.zeros([ROWS, D_PAD], tl.float32)
    offs_n = tl.arange(0, BLOCK_N)
    for n0 in range(start, end, BLOCK_N):
        pos = n0 + offs_n
        n_mask = pos < end
        blk = tl.load(bt_row + pos // block_size, mask=n_mask, other=0).to(tl.int64)
        tok = blk * c_stride_blk + (pos % block_size).to(tl.int64) * c_stride_tok
        kv_off = (tok + head_off)[:, None] + offs_d[None, :]
        kv_mask = n_mask[:, None] & d_mask[None, :]
        k = tl.load(k_cache_ptr + kv_off, mask=kv_mask, other=0.0)
        v = tl.load(v_cache_ptr + kv_off, mask=kv_mask, other=0.0)
        if FP8:
            # fastest of the variants measured (bench/results/kernels.md): e4m3 -> fp32 * scale ->
            # bf16;
            # direct e4m3 -> bf16, or -> fp16 with fp16 MMAs (also by bit placement), were slower
            k = (k.to(tl.float32) * k_scale).to(q.dtype)
            v = (v.to(tl.float32) * v_scale).to(q.dtype)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        if SOFTCAP:  # tanh(x) = 1 - 2 / (exp(2x) + 1): exact at both ends (exp -> inf or 0)
            s = softcap_l2 * (1.0 - 2.0 / (tl.exp(2.0 * s / softcap_l2) + 1.0))
        if CAUSAL:
            # the loop's first key is visible to every row of a prefill tile (the window starts
            # at the first row's), so the row max is finite from then on
            seen = (pos[None, :] <= q_pos[:, None]) & n_mask[None, :]
            if WINDOW:
                seen = seen & (pos[None, :] > q_pos[:, None] - window)
            s = tl.where(seen, s, float("-inf"))
        else:
            s = tl.where(n_mask[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        if WINDOW:  # a row may see none of the first keys: keep -inf - -inf out of exp2
            m_new = tl.where(m_new == float("-inf"), -1e30, m_new)
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    return m_i, l_i, acc


@triton.jit
def load_sink_l2(sinks_ptr, heads, mask, SINKS: tl.constexpr):
    """The sink logits of a block of `heads` in the kernels' base-2 units (times log2(e)); 0
    without SINKS (then never read)."""
    sink = 0.0
    if SINKS:
        sink = tl.load(sinks_ptr + heads, mask=mask, other=0.0).to(tl.float32)
        sink = sink * 1.4426950408889634
    return sink


@triton.jit
def normalise(m_i, l_i, acc, sink_l2, SINKS: tl.constexpr):
    """acc / l per row; with SINKS the sink's e^sink joins l (rescaled to a common max, so a sink
    far above the logits cannot overflow). A row that saw no key (l == 0) gives 0."""
    if SINKS:
        m_new = tl.maximum(m_i, sink_l2)
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.exp2(sink_l2 - m_new)
        acc = acc * alpha[:, None]
    safe_l = tl.where(l_i == 0.0, 1.0, l_i)
    return acc / safe_l[:, None]
