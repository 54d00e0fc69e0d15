"""Triton paged attention for per-layer geometry against the engine's torch path: sliding windows
(with the blocks out of the window pointing at a NaN-filled null block, as the sliding block
manager leaves them: never read), attention-logit soft-capping, head dims 256 and 512, one KV head
(Gemma 4's full layers), decode (split and unsplit), prefill and chunked prefill; and the Triton
backend end to end through a Gemma 4 tiny model's greedy tokens against the torch path."""

from __future__ import annotations

import pytest
import torch

from serving.attention.base import AttentionMetadata
from serving.attention.torch_ref import TorchRefBackend
from serving.kernels.paged_decode import paged_decode
from serving.kernels.paged_prefill import paged_prefill

pytestmark = pytest.mark.gpu
TOL = 1.5e-2  # bf16 operands and output against a float32 torch path
DEV = "cuda"
DTYPE = torch.bfloat16
BS = 16


def _case(specs, hq, hk, hd, window, seed):
    """Blocks permuted; with a window, every block wholly before the first query's window is the
    null block 0, filled with NaN. Returns (query, k, v, meta, clean k, clean v)."""
    g = torch.Generator().manual_seed(seed)
    seq_lens = [c + q for c, q in specs]
    need = [-(-s // BS) for s in seq_lens]
    nb = sum(need) + 2
    perm = (torch.randperm(nb - 1, generator=g) + 1).tolist()  # block 0 is the null block
    tables = torch.zeros(len(specs), max(need), dtype=torch.int32)
    used = 0
    for i, n in enumerate(need):
        tables[i, :n] = torch.tensor(perm[used : used + n], dtype=torch.int32)
        used += n
    k = torch.randn(nb, BS, hk, hd, generator=g)
    v = torch.randn(nb, BS, hk, hd, generator=g)
    clean_tables = tables.clone()
    if window is not None:
        for i, (ctx, _) in enumerate(specs):
            first = max(0, (ctx - window + 1) // BS)  # what sliding_blocks.py frees
            tables[i, :first] = 0
    k_dirty, v_dirty = k.clone(), v.clone()
    k_dirty[0], v_dirty[0] = float("nan"), float("nan")
    q = torch.randn(sum(q for _, q in specs), hq, hd, generator=g)
    qsl = [0]
    for _, n in specs:
        qsl.append(qsl[-1] + n)
    qlens = [n for _, n in specs]
    nd = 0
    while nd < len(qlens) and qlens[nd] == 1:
        nd += 1

    def meta(t):
        return AttentionMetadata(
            query_start_loc=torch.tensor(qsl, dtype=torch.int32, device=DEV),
            seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=DEV),
            slot_mapping=torch.zeros(1, dtype=torch.int64, device=DEV),
            block_tables=t.to(DEV),
            max_query_len=max(qlens),
            max_seq_len=max(seq_lens),
            num_decode_tokens=nd,
            query_lens_cpu=qlens,
            seq_lens_cpu=seq_lens,
        )

    bf = DTYPE
    return (
        q.to(DEV, bf),
        k_dirty.to(DEV, bf),
        v_dirty.to(DEV, bf),
        meta(tables),
        (q.to(DEV, bf).float(), k.to(DEV, bf).float(), v.to(DEV, bf).float(), meta(clean_tables)),
    )


def _torch_path(ref_inputs, scale, window, softcap):
    q, k, v, meta = ref_inputs
    return TorchRefBackend().forward(q, k, v, meta, scale, window=window, softcap=softcap)


def _rel(out, ref):
    return float((out.float() - ref).norm() / ref.norm())


GEOMETRIES = [  # (q heads, kv heads, head_dim, window, softcap)
    (8, 4, 256, 64, None),  # Gemma 3/4 sliding layers
    (16, 1, 512, None, None),  # Gemma 4 full layers: one shared KV head, 512 wide
    (16, 1, 512, 100, 50.0),
    (8, 2, 128, 37, 30.0),  # a window that ends mid-block, soft-capped logits
    (4, 4, 64, None, 20.0),
]


@pytest.mark.parametrize("geom", GEOMETRIES)
@pytest.mark.parametrize("num_splits", [None, 1, 4])
def test_decode_matches_the_torch_path(geom, num_splits):
    hq, hk, hd, window, cap = geom
    specs = [(c, 1) for c in (0, 5, 63, 64, 65, 300, 1500)]
    q, k, v, meta, ref_in = _case(specs, hq, hk, hd, window, seed=hd + hq)
    out = torch.full_like(q, float("nan"))
    scale = hd**-0.5
    paged_decode(
        q, k, v, meta.block_tables, meta.seq_lens, meta.query_start_loc, out, scale,
        meta.max_seq_len, num_splits=num_splits, window=window, softcap=cap,
    )  # fmt: skip
    ref = _torch_path(ref_in, scale, window, cap)
    assert not out.isnan().any()
    assert _rel(out, ref) < TOL


@pytest.mark.parametrize("geom", GEOMETRIES)
def test_prefill_and_chunks_match_the_torch_path(geom):
    hq, hk, hd, window, cap = geom
    specs = [(0, 1), (0, 90), (200, 45), (13, 3), (64, 64), (1000, 130)]
    q, k, v, meta, ref_in = _case(specs, hq, hk, hd, window, seed=7 + hd)
    out = torch.full_like(q, float("nan"))
    scale = hd**-0.5
    paged_prefill(
        q, k, v, meta.block_tables, meta.seq_lens, meta.query_start_loc, out, scale,
        meta.max_query_len, window=window, softcap=cap,
    )  # fmt: skip
    ref = _torch_path(ref_in, scale, window, cap)
    assert not out.isnan().any()
    assert _rel(out, ref) < TOL


def test_triton_backend_serves_gemma4_like_the_torch_path(tmp_path):
    """A tiny Gemma 4 (full layers 32 wide with one KV head, sliding layers 16 wide, window 8)
    greedy through the engine on the GPU, Triton backend, equals the CPU torch path's tokens."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[2] / "support"))
    from engine_fixtures import greedy, make_engine, run_to_completion, save_tiny_model

    from serving.loader import load_model_files

    save_tiny_model("gemma4_text", tmp_path, seed=5)
    loaded = load_model_files(tmp_path)
    prompts = [list(range(3, 40)), list(range(50, 61)), [7] * 25]
    arrivals = {0: [(str(i), p, greedy(16)) for i, p in enumerate(prompts)]}
    cpu = run_to_completion(make_engine(loaded, max_num_batched_tokens=12), arrivals)
    gpu = run_to_completion(
        make_engine(loaded, device="cuda", dtype="float32", max_num_batched_tokens=12), arrivals
    )
    for rid in cpu:
        assert gpu[rid].outputs[0].token_ids == cpu[rid].outputs[0].token_ids, rid
