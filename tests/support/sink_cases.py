"""Paged attention with attention sinks (gpt-oss): the Triton kernels against the torch path.

One random step per call: sequences of (cached tokens, query rows) in permuted blocks; with a
window, the blocks wholly before the first query's window are the null block 0, filled with NaN
(as the sliding block manager leaves them: a kernel that reads one gives NaN). The torch path
(`TorchRefBackend`, float32, clean tables) is the reference. Used by the GPU tests
(tests/serving/gpu/test_attention_sinks.py) and, under the Triton interpreter on the CPU, by
tests/serving/test_attention_sinks_cpu.py.
"""

from __future__ import annotations

import torch

from serving.attention.base import AttentionMetadata
from serving.attention.torch_ref import TorchRefBackend

BS = 16


def _tables(specs, window, g):
    seq_lens = [c + q for c, q in specs]
    need = [-(-s // BS) for s in seq_lens]
    nb = sum(need) + 2
    perm = (torch.randperm(nb - 1, generator=g) + 1).tolist()  # block 0: the null block
    tables = torch.zeros(len(specs), max(need), dtype=torch.int32)
    used = 0
    for i, n in enumerate(need):
        tables[i, :n] = torch.tensor(perm[used : used + n], dtype=torch.int32)
        used += n
    dirty = tables.clone()
    if window is not None:
        for i, (ctx, _) in enumerate(specs):
            dirty[i, : max(0, (ctx - window + 1) // BS)] = 0
    return nb, tables, dirty


def _meta(specs, tables, device) -> AttentionMetadata:
    qlens = [q for _, q in specs]
    seq_lens = [c + q for c, q in specs]
    qsl = [0]
    for q in qlens:
        qsl.append(qsl[-1] + q)
    nd = 0
    while nd < len(qlens) and qlens[nd] == 1:
        nd += 1
    return AttentionMetadata(
        query_start_loc=torch.tensor(qsl, dtype=torch.int32, device=device),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=device),
        slot_mapping=torch.zeros(1, dtype=torch.int64, device=device),
        block_tables=tables.to(device),
        max_query_len=max(qlens),
        max_seq_len=max(seq_lens),
        num_decode_tokens=nd,
        query_lens_cpu=qlens,
        seq_lens_cpu=seq_lens,
    )


def sink_errors(
    specs: list[tuple[int, int]],
    hq: int,
    hk: int,
    hd: int,
    *,
    window: int | None = None,
    softcap: float | None = None,
    device: str = "cuda",
    dtype: torch.dtype = torch.bfloat16,
    splits: tuple[int | None, ...] = (1, 4),
    sink_std: float = 2.0,
    use_sinks: bool = True,
    seed: int = 0,
) -> dict[str, float]:
    """Max |kernel - torch path| over the step's rows: "decode/<splits>" for each split count
    when every query is one row, else "prefill"; plus "sink_effect", how far the torch path with
    sinks is from the one without (a check that the case exercises the sinks at all). With
    `use_sinks=False` the kernels and the reference run without sinks (the unchanged variant)."""
    from serving.kernels.paged_decode import paged_decode
    from serving.kernels.paged_prefill import paged_prefill

    g = torch.Generator().manual_seed(seed)
    nb, clean, dirty = _tables(specs, window, g)
    k = torch.randn(nb, BS, hk, hd, generator=g).to(dtype)
    v = torch.randn(nb, BS, hk, hd, generator=g).to(dtype)
    q = torch.randn(sum(n for _, n in specs), hq, hd, generator=g).to(dtype)
    sinks = (sink_std * torch.randn(hq, generator=g)).to(dtype)
    k_dirty, v_dirty = k.clone(), v.clone()
    k_dirty[0], v_dirty[0] = float("nan"), float("nan")
    ref_meta = _meta(specs, clean, "cpu")
    ref_args = (q.float(), k.float(), v.float(), ref_meta, hd**-0.5)
    opts = {"window": window, "softcap": softcap}
    ref = TorchRefBackend().forward(*ref_args, sinks=sinks.float(), **opts)
    plain = TorchRefBackend().forward(*ref_args, **opts)
    meta = _meta(specs, dirty, device)
    qd, kd, vd, sd = (t.to(device) for t in (q, k_dirty, v_dirty, sinks))
    errors = {"sink_effect": (ref - plain).abs().max().item()}
    if not use_sinks:
        ref, sd = plain, None
    common = (qd, kd, vd, meta.block_tables, meta.seq_lens, meta.query_start_loc)
    if meta.max_query_len == 1:
        for n in splits:
            out = torch.zeros_like(qd)
            paged_decode(*common, out, hd**-0.5, meta.max_seq_len, num_splits=n, sinks=sd, **opts)
            errors[f"decode/{n}"] = _err(out, ref)
    else:
        out = torch.zeros_like(qd)
        paged_prefill(*common, out, hd**-0.5, meta.max_query_len, sinks=sd, **opts)
        errors["prefill"] = _err(out, ref)
    return errors


def _err(out: torch.Tensor, ref: torch.Tensor) -> float:
    diff = (out.float().cpu() - ref).abs().max().item()
    return float("inf") if diff != diff else diff  # NaN: a freed block was read
