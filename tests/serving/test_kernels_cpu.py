"""The GPU code paths on a machine without CUDA/Triton (what CI runs): everything imports, the
kernels refuse to run with a clear error, `get_backend` falls back to the torch reference, and
the host-side policies (split count, graph buckets) behave."""

from __future__ import annotations

import importlib

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from serving.kernels import HAS_TRITON


def test_every_gpu_module_imports_without_triton():
    for name in [
        "serving.kernels.kv_write",
        "serving.kernels.paged_decode",
        "serving.kernels.paged_prefill",
        "serving.kernels.paged_kv",
        "serving.kernels.fused_ops",
        "serving.kernels.qkv_rope_cache",
        "serving.kernels.gemv",
        "serving.kernels.pdl",
        "serving.kernels.fused_forward",
        "serving.attention.triton_backend",
        "serving.engine.worker.cuda_graphs",
    ]:
        importlib.import_module(name)


@pytest.mark.skipif(HAS_TRITON, reason="checks the no-Triton behaviour")
def test_kernels_raise_a_clear_error_without_triton():
    from serving.kernels.fused_ops import silu_and_mul
    from serving.kernels.kv_write import write_kv

    with pytest.raises(RuntimeError, match="triton"):
        silu_and_mul(torch.zeros(2, 8))
    with pytest.raises(RuntimeError, match="triton"):
        write_kv(
            torch.zeros(1, 1, 8),
            torch.zeros(1, 1, 8),
            torch.zeros(1, 4, 1, 8),
            torch.zeros(1, 4, 1, 8),
            torch.zeros(1, dtype=torch.long),
        )


@pytest.mark.skipif(HAS_TRITON and torch.cuda.is_available(), reason="checks the CPU fallback")
def test_get_backend_cuda_falls_back_to_torch_reference_without_triton():
    from serving.attention import get_backend

    assert get_backend("cuda").name == "torch_ref"
    assert get_backend("cpu").name == "torch_ref"


def test_split_count_fills_the_gpu_and_never_exceeds_the_tiles():
    from serving.kernels.paged_decode import choose_num_splits

    assert choose_num_splits(256, 8, 40960) == 1  # 2048 programs already fill 132 SMs
    assert choose_num_splits(1, 8, 40960) == 64  # 8 programs: split the context up to 64 ways
    assert choose_num_splits(1, 8, 64) == 1  # one 64-token tile cannot be split
    assert choose_num_splits(1, 3, 200) == 4  # at most one split per tile (4 tiles)
    for batch in (1, 3, 16, 64):
        s = choose_num_splits(batch, 4, 8192)
        assert s & (s - 1) == 0  # powers of two: few compiled variants


def test_graph_buckets_pad_up_and_fall_back_past_the_largest():
    from serving.engine.worker.cuda_graphs import GpuForward

    gf = GpuForward.__new__(GpuForward)  # the bucket policy alone, no GPU buffers
    gf.buckets = (1, 2, 4, 8, 16)
    assert [gf._bucket(n) for n in (1, 3, 5, 16)] == [1, 4, 8, 16]
    assert gf._bucket(17) is None  # larger decode batches run eagerly


def test_prefill_graphs_take_steps_with_prompt_rows_up_to_their_width_and_decode_context():
    from serving.attention.base import AttentionMetadata
    from serving.engine.worker.graph_buckets import (
        GRAPHED_DECODE_CONTEXT,
        PREFILL_BUCKETS,
        prefill_bucket,
    )

    def meta(qlens: list[int], ctx: int | list[int] = 0) -> AttentionMetadata:
        ctxs = ctx if isinstance(ctx, list) else [ctx] * len(qlens)
        starts = [0]
        for q in qlens:
            starts.append(starts[-1] + q)
        nd = next((i for i, q in enumerate(qlens) if q != 1), len(qlens))
        slens = [c + q for c, q in zip(ctxs, qlens, strict=True)]
        return AttentionMetadata(
            query_start_loc=torch.tensor(starts, dtype=torch.int32),
            seq_lens=torch.tensor(slens, dtype=torch.int32),
            slot_mapping=torch.zeros(sum(qlens), dtype=torch.int64),
            block_tables=torch.zeros(len(qlens), 4, dtype=torch.int32),
            max_query_len=max(qlens),
            max_seq_len=max(slens),
            num_decode_tokens=nd if nd < len(qlens) else 0,
            query_lens_cpu=list(qlens),
            seq_lens_cpu=slens,
        )

    def bucket(m: AttentionMetadata, buckets=PREFILL_BUCKETS, width: int = 8) -> int | None:
        return prefill_bucket(m, int(m.query_start_loc[-1]), buckets, width)

    assert [bucket(meta([n])) for n in (2, 16, 17, 100, 128, 300, 512, 513, 1100, 2048)] == [
        16,
        16,
        32,
        128,
        128,
        384,
        512,
        768,
        1536,
        2048,
    ]
    assert bucket(meta([200], ctx=300)) == 256  # a later chunk or a prefix hit
    assert bucket(meta([2049])) is None  # past the largest: eager
    assert bucket(meta([1])) is None  # one token: the decode graphs' case
    assert bucket(meta([1, 1, 1])) is None  # decode-only: the decode graphs' case
    assert bucket(meta([40, 30])) == 128  # a burst of prompts
    assert bucket(meta([1, 1, 30], ctx=[500, 90, 0])) == 32  # decode rows joined by a prompt
    assert bucket(meta([1] * 8 + [5])) is None  # wider than the graph: eager
    assert bucket(meta([1] * 8 + [5]), width=9) == 16
    far = GRAPHED_DECODE_CONTEXT
    assert bucket(meta([1, 30], ctx=[far - 1, 0])) == 32  # the decode row reaches the limit exactly
    assert bucket(meta([1, 30], ctx=[far, 0])) is None  # past it: eager (split-K decode kernel)
    assert bucket(meta([30], ctx=far * 2)) == 32  # a prompt row's context has no limit
    assert bucket(meta([64]), buckets=()) is None  # prefill graphs off
    no_host = meta([40, 30])
    no_host.query_lens_cpu = None
    assert bucket(no_host) is None  # several sequences and no host lengths: cannot check, eager


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([1, 1, 2, 5, 40]), min_size=1, max_size=12),
    st.integers(0, 5),
    st.randoms(use_true_random=False),
)
def test_graph_decode_layout_keeps_one_token_queries_and_points_the_rest_at_a_prompt_row(
    qlens, pad, rnd
):
    """Against a loop over the sequences: a one-token query keeps its length and row; every
    other sequence, the padding ones included, gets length 0 and the first row of the first
    prompt (which the prefill kernel rewrites after the decode kernel)."""
    from serving.engine.worker.graph_buckets import graph_decode_layout

    if all(q == 1 for q in qlens):
        qlens = [*qlens, 3]  # a prefill graph holds a prompt row by construction
    starts = [0]
    for q in qlens:
        starts.append(starts[-1] + q)
    starts += [starts[-1]] * pad
    lens = [rnd.randint(q, q + 300) for q in qlens] + [0] * pad
    width = len(lens)
    got_lens, got_rows = (
        torch.full((width,), -1, dtype=torch.int32),
        torch.full((width,), -1, dtype=torch.int32),
    )
    graph_decode_layout(
        torch.tensor(starts, dtype=torch.int32),
        torch.tensor(lens, dtype=torch.int32),
        got_lens,
        got_rows,
    )
    first_prompt_row = next(starts[i] for i, q in enumerate(qlens) if q > 1)
    q_all = [*qlens, *[0] * pad]
    assert got_lens.tolist() == [lens[i] if q_all[i] == 1 else 0 for i in range(width)]
    assert got_rows.tolist() == [
        starts[i] if q_all[i] == 1 else first_prompt_row for i in range(width)
    ]


def test_backend_requires_triton_or_positive_scales():
    from serving.attention.triton_backend import TritonAttentionBackend

    if not HAS_TRITON:
        with pytest.raises(RuntimeError, match="triton"):
            TritonAttentionBackend()
    else:
        with pytest.raises(ValueError, match="scales"):
            TritonAttentionBackend(k_scale=0.0)


def test_programmatic_launch_is_off_where_it_cannot_run():
    from serving.kernels import pdl

    assert pdl.MODE == "auto"
    assert not pdl.enabled(torch.device("cpu"))
    with pytest.raises(ValueError, match="programmatic_launch"):
        pdl.set_mode("on")
    assert pdl.MODE == "auto"  # a refused mode leaves the last one
