"""What the sampler reports of each row of raw logits, in two kernels: the log-normaliser (lse),
the entropy, the first argmax and its logprob.

torch's log_softmax gives each row one block: at batch 1 over Qwen3's 151,936 logits that is one
SM streaming the row three times while the rest of the GPU idles, and the entropy's
exp/clamp/mul/sum, the argmax, the gather and the packing of the results for the host are about
ten launches more. Here each row is cut into chunks that run in parallel. A chunk keeps its
maximum m (first index on ties), s = sum exp(x - m) and t = sum exp(x - m) (x - m); a second
kernel folds a row's chunks in order (the same bits every run, no atomics) with
    S = sum s_c exp(m_c - M),  T = sum (t_c + (m_c - M) s_c) exp(m_c - M),
    lse = M + log S,  entropy = log S - T / S,  logprob(argmax) = -log S
for the row maximum M. A NaN in a row makes its lse, entropy and logprob NaN and its argmax the
first NaN, as torch's ops give.

Kernel files must not use `from __future__ import annotations` (see _compat.py).
"""

import torch

from serving.kernels._compat import HAS_TRITON, require_triton, tl, triton

CHUNK = 2048  # logits per program of the first kernel
_NO_INDEX = 2**31 - 1


@triton.jit
def _chunk_kernel(  # type: ignore[no-untyped-def]  # Triton kernel
    x_ptr,
    m_ptr,
    i_ptr,
    s_ptr,
    t_ptr,
    n_ptr,
    V,
    stride_row,
    num_chunks,
    CHUNK_SIZE: tl.constexpr,
    NO_INDEX: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    offs = chunk * CHUNK_SIZE + tl.arange(0, CHUNK_SIZE)
    valid = offs < V
    x = tl.load(x_ptr + row * stride_row + offs, mask=valid, other=float("-inf")).to(tl.float32)
    is_nan = x != x
    clean = tl.where(is_nan, float("-inf"), x)
    m = tl.max(clean, 0)
    first = tl.min(tl.where(valid & (clean == m), offs, NO_INDEX), 0)
    first_nan = tl.min(tl.where(is_nan, offs, NO_INDEX), 0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    shifted = clean - m_safe
    p = tl.exp(shifted)
    s = tl.sum(p, 0)
    t = tl.sum(tl.where(p > 0.0, p * shifted, 0.0), 0)
    out = row * num_chunks + chunk
    tl.store(m_ptr + out, m)
    tl.store(i_ptr + out, first)
    tl.store(s_ptr + out, s)
    tl.store(t_ptr + out, t)
    tl.store(n_ptr + out, first_nan)


@triton.jit
def _fold_kernel(  # type: ignore[no-untyped-def]  # Triton kernel
    m_ptr,
    i_ptr,
    s_ptr,
    t_ptr,
    n_ptr,
    lse_ptr,
    ids_ptr,
    packed_ptr,
    num_rows,
    num_chunks,
    C_PAD: tl.constexpr,
    NO_INDEX: tl.constexpr,
):
    row = tl.program_id(0)
    offs = tl.arange(0, C_PAD)
    mask = offs < num_chunks
    base = row.to(tl.int64) * num_chunks
    m = tl.load(m_ptr + base + offs, mask=mask, other=float("-inf"))
    idx = tl.load(i_ptr + base + offs, mask=mask, other=NO_INDEX)
    s = tl.load(s_ptr + base + offs, mask=mask, other=0.0)
    t = tl.load(t_ptr + base + offs, mask=mask, other=0.0)
    first_nan = tl.min(tl.load(n_ptr + base + offs, mask=mask, other=NO_INDEX), 0)
    big_m = tl.max(m, 0)
    argmax = tl.min(tl.where(mask & (m == big_m), idx, NO_INDEX), 0)  # chunks in order: the first
    m_safe = tl.where(big_m == float("-inf"), 0.0, big_m)
    w = tl.where(s > 0.0, tl.exp(m - m_safe), 0.0)
    total_s = tl.sum(s * w, 0)
    total_t = tl.sum(tl.where(s > 0.0, (t + (m - m_safe) * s) * w, 0.0), 0)
    log_s = tl.log(total_s)
    lse = m_safe + log_s
    entropy = log_s - total_t / total_s
    logprob = -log_s
    has_nan = first_nan != NO_INDEX
    empty = total_s == 0.0  # every logit -inf: no distribution
    nan = float("nan")
    lse = tl.where(has_nan | empty, nan, lse)
    entropy = tl.where(has_nan | empty, nan, entropy)
    logprob = tl.where(has_nan | empty, nan, logprob)
    argmax = tl.where(has_nan, first_nan, tl.where(argmax == NO_INDEX, 0, argmax))
    tl.store(lse_ptr + row, lse)
    tl.store(ids_ptr + row, argmax.to(tl.int64))
    tl.store(packed_ptr + row, argmax.to(tl.float64))
    tl.store(packed_ptr + num_rows + row, logprob.to(tl.float64))
    tl.store(packed_ptr + 2 * num_rows + row, entropy.to(tl.float64))


def applies(logits: torch.Tensor) -> bool:
    return (
        HAS_TRITON
        and logits.is_cuda
        and logits.dim() == 2
        and logits.shape[0] > 0
        and logits.shape[1] > 0
    )


def logit_stats(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For logits [B, V]: lse float32 [B], the first argmax int64 [B], and float64 [3, B] holding
    (argmax, its logprob, the entropy in nats) per row, the layout of `DeviceSample.packed`."""
    require_triton()
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    rows, vocab = logits.shape
    chunks = triton.cdiv(vocab, CHUNK)
    dev = logits.device
    f32 = torch.float32
    m, s, t = (torch.empty(rows, chunks, dtype=f32, device=dev) for _ in range(3))
    idx, first_nan = (torch.empty(rows, chunks, dtype=torch.int32, device=dev) for _ in range(2))
    lse = torch.empty(rows, dtype=f32, device=dev)
    ids = torch.empty(rows, dtype=torch.int64, device=dev)
    packed = torch.empty(3, rows, dtype=torch.float64, device=dev)
    _chunk_kernel[(rows, chunks)](
        logits,
        m,
        idx,
        s,
        t,
        first_nan,
        vocab,
        logits.stride(0),
        chunks,
        CHUNK_SIZE=CHUNK,
        NO_INDEX=_NO_INDEX,
        num_warps=4,
    )
    _fold_kernel[(rows,)](
        m,
        idx,
        s,
        t,
        first_nan,
        lse,
        ids,
        packed,
        rows,
        chunks,
        C_PAD=max(16, triton.next_power_of_2(chunks)),
        NO_INDEX=_NO_INDEX,
        num_warps=4,
    )
    return lse, ids, packed
