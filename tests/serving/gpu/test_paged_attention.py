"""Triton paged attention (decode, prefill, mixed) against an independent float32 reference and
the engine's torch reference backend: random block tables, GQA 1/3/4/8, head dims 64 and 128,
contexts 1 to 8k."""

from __future__ import annotations

import math

import pytest
import torch
from gpu_attention_ref import make_case, per_seq_rel_errors, reference_attention, rel_error

from serving.kernels.paged_decode import paged_decode
from serving.kernels.paged_prefill import paged_prefill

pytestmark = pytest.mark.gpu
TOL = 1e-2  # bf16 inputs, bf16 P@V operands, bf16 output: ~3e-3 typical

GQA = [(8, 8), (12, 4), (16, 4), (32, 4)]  # ratios 1, 3, 4, 8


@pytest.mark.parametrize("heads", GQA)
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("num_splits", [None, 1, 8])
def test_decode_matches_reference(heads, head_dim, num_splits):
    hq, hk = heads
    ctx_lens = [0, 6, 15, 16, 99, 1000, 4095, 8191]  # + 1 query token each: contexts 1..8192
    case = make_case([(c, 1) for c in ctx_lens], hq, hk, head_dim, seed=hq * head_dim)
    scale = head_dim**-0.5
    out = torch.full_like(case.query, float("nan"))  # every row must be written
    paged_decode(
        case.query,
        case.k_cache,
        case.v_cache,
        case.meta.block_tables,
        case.meta.seq_lens,
        case.meta.query_start_loc,
        out,
        scale,
        case.meta.max_seq_len,
        num_splits=num_splits,
    )
    ref = reference_attention(case.query, case.k_cache, case.v_cache, case.meta, scale)
    assert not out.isnan().any()
    errs = per_seq_rel_errors(out, ref, case.query_lens)
    assert max(errs) < TOL, errs


@pytest.mark.parametrize("heads", GQA)
@pytest.mark.parametrize("head_dim", [64, 128])
def test_prefill_and_chunked_prefill_match_reference(heads, head_dim):
    hq, hk = heads
    # (prefix already cached, new query tokens): fresh prompts, chunks after earlier chunks,
    # prefix-cache hits ending mid-block, a long 8k context with a short chunk
    specs = [(0, 1), (0, 37), (0, 300), (100, 50), (13, 3), (32, 64), (7900, 292), (0, 16)]
    case = make_case(specs, hq, hk, head_dim, seed=7 + hq)
    scale = head_dim**-0.5
    out = torch.full_like(case.query, float("nan"))
    paged_prefill(
        case.query,
        case.k_cache,
        case.v_cache,
        case.meta.block_tables,
        case.meta.seq_lens,
        case.meta.query_start_loc,
        out,
        scale,
        case.meta.max_query_len,
    )
    ref = reference_attention(case.query, case.k_cache, case.v_cache, case.meta, scale)
    assert not out.isnan().any()
    errs = per_seq_rel_errors(out, ref, case.query_lens)
    assert max(errs) < TOL, errs


@pytest.mark.parametrize("heads", [(9, 3), (32, 8)])
def test_prefill_kernel_over_a_padded_step_as_a_graph_replays_it(heads):
    """The layout of a prefill CUDA graph: every row (decode rows too) through the prefill
    kernel, tokens padded past the last sequence, sequences padded with empty queries, and the
    tile height from the padded token count. Real rows match the reference; padding stays
    untouched."""
    hq, hk = heads
    specs = [(40, 1), (2047, 1), (0, 77), (500, 128), (0, 2), (16, 1), (63, 65)]
    case = make_case(specs, hq, hk, 64, seed=13)
    real, pad_tokens, pad_seqs = case.query.shape[0], 90, 9
    query = torch.cat([case.query, torch.randn(pad_tokens, hq, 64, device="cuda").bfloat16()])
    m = case.meta
    qsl = torch.cat(
        [m.query_start_loc, torch.full((pad_seqs,), real, dtype=torch.int32, device="cuda")]
    )
    seq_lens = torch.cat([m.seq_lens, torch.zeros(pad_seqs, dtype=torch.int32, device="cuda")])
    tables = torch.cat(
        [
            m.block_tables,
            torch.zeros(pad_seqs, m.block_tables.shape[1], dtype=torch.int32, device="cuda"),
        ]
    )
    out = torch.full_like(query, float("nan"))
    paged_prefill(
        query, case.k_cache, case.v_cache, tables, seq_lens, qsl, out, 0.125, query.shape[0]
    )
    ref = reference_attention(case.query, case.k_cache, case.v_cache, m, 0.125)
    assert not out[:real].isnan().any() and out[real:].isnan().all()
    assert max(per_seq_rel_errors(out[:real], ref, case.query_lens)) < TOL
    # skip_single leaves the one-token queries (the decode kernel's, in a graph) unwritten
    out = torch.full_like(query, float("nan"))
    paged_prefill(
        query,
        case.k_cache,
        case.v_cache,
        tables,
        seq_lens,
        qsl,
        out,
        0.125,
        query.shape[0],
        skip_single=True,
    )
    starts = m.query_start_loc.tolist()
    for i, q in enumerate(case.query_lens):
        rows = out[starts[i] : starts[i] + q]
        if q == 1:
            assert rows.isnan().all()
        else:
            assert rel_error(rows, ref[starts[i] : starts[i] + q]) < TOL


@pytest.mark.parametrize("heads", [(9, 3), (32, 8)])
def test_backend_over_a_prefill_graphs_layout_matches_reference(heads):
    """Decode rows anywhere among prompts (not only first), padding sequences: the backend with
    graph_decode_layout's inputs runs decode rows on the split-K kernel and the rest on the
    prefill kernel, and every real row matches the reference."""
    from serving.attention.base import AttentionMetadata
    from serving.attention.triton_backend import TritonAttentionBackend
    from serving.engine.worker.graph_buckets import graph_decode_layout

    hq, hk = heads
    specs = [(40, 1), (0, 77), (3000, 1), (500, 128), (16, 1), (0, 2), (63, 1)]
    case = make_case(specs, hq, hk, 64, seed=17)
    real, pad_seqs = case.query.shape[0], 5
    m = case.meta
    dev = {"dtype": torch.int32, "device": "cuda"}
    qsl = torch.cat([m.query_start_loc, torch.full((pad_seqs,), real, **dev)])
    seq_lens = torch.cat([m.seq_lens, torch.zeros(pad_seqs, **dev)])
    tables = torch.cat([m.block_tables, torch.zeros(pad_seqs, m.block_tables.shape[1], **dev)])
    width = seq_lens.shape[0]
    decode_lens, decode_rows = torch.zeros(width, **dev), torch.zeros(width, **dev)
    graph_decode_layout(qsl, seq_lens, decode_lens, decode_rows)
    meta = AttentionMetadata(
        query_start_loc=qsl,
        seq_lens=seq_lens,
        slot_mapping=m.slot_mapping,
        block_tables=tables,
        max_query_len=real,
        max_seq_len=4096,
        decode_seq_lens=decode_lens,
        decode_rows=decode_rows,
    )
    out = TritonAttentionBackend().forward(case.query, case.k_cache, case.v_cache, meta, 0.125)
    ref = reference_attention(case.query, case.k_cache, case.v_cache, m, 0.125)
    assert max(per_seq_rel_errors(out, ref, case.query_lens)) < TOL


@pytest.mark.parametrize("block_size", [16, 32])
def test_mixed_step_through_backend_matches_both_references(block_size):
    from serving.attention.torch_ref import TorchRefBackend
    from serving.attention.triton_backend import TritonAttentionBackend

    specs = [
        (40, 1),
        (0, 1),
        (2047, 1),
        (0, 77),
        (500, 128),
        (16, 1),
    ]  # decodes first, then prefills
    # the last (16, 1) is a 1-token chunk after prefills: served by the prefill kernel
    case = make_case(specs, 16, 4, 128, block_size=block_size, seed=3)
    assert case.meta.num_decode_tokens == 3
    scale = 1 / math.sqrt(128)
    out = TritonAttentionBackend().forward(case.query, case.k_cache, case.v_cache, case.meta, scale)
    ref = reference_attention(case.query, case.k_cache, case.v_cache, case.meta, scale)
    oracle = TorchRefBackend().forward(case.query, case.k_cache, case.v_cache, case.meta, scale)
    assert max(per_seq_rel_errors(out, ref, case.query_lens)) < TOL
    assert max(per_seq_rel_errors(out, oracle, case.query_lens)) < TOL
    # the oracle and our float32 reference agree with each other too
    assert rel_error(oracle, ref) < TOL


def test_unset_num_decode_tokens_still_correct():
    from serving.attention.triton_backend import TritonAttentionBackend

    case = make_case([(10, 1), (200, 1), (0, 40)], 12, 4, 64, seed=11)
    case.meta.num_decode_tokens = 0
    scale = 0.125
    out = TritonAttentionBackend().forward(case.query, case.k_cache, case.v_cache, case.meta, scale)
    ref = reference_attention(case.query, case.k_cache, case.v_cache, case.meta, scale)
    assert max(per_seq_rel_errors(out, ref, case.query_lens)) < TOL


def test_decode_query_from_strided_qkv_view():
    """The model passes q as a view of the fused qkv projection (token stride > heads*dim)."""
    case = make_case([(300, 1), (5, 1)], 16, 8, 128, seed=5)
    wide = torch.randn(2, 16 * 128 + 2 * 8 * 128, device="cuda", dtype=torch.bfloat16)
    wide[:, : 16 * 128] = case.query.reshape(2, -1)
    q_view = wide[:, : 16 * 128].view(2, 16, 128)
    out = torch.empty_like(case.query)
    paged_decode(
        q_view,
        case.k_cache,
        case.v_cache,
        case.meta.block_tables,
        case.meta.seq_lens,
        case.meta.query_start_loc,
        out,
        0.088,
        case.meta.max_seq_len,
    )
    ref = reference_attention(case.query, case.k_cache, case.v_cache, case.meta, 0.088)
    assert rel_error(out, ref) < TOL
