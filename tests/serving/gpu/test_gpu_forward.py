"""The fused GPU forward and the CUDA-graph decode path against the model's own eager forward
(torch reference attention) on small random models of the real architectures."""

from __future__ import annotations

import pytest
import torch
from gpu_model_ref import new_caches, random_model, step_meta

from serving.attention.torch_ref import TorchRefBackend
from serving.attention.triton_backend import TritonAttentionBackend
from serving.engine.worker.cuda_graphs import GpuForward
from serving.engine.worker.graph_buckets import PREFILL_BUCKETS
from serving.kernels.fused_forward import fused_forward

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_fused_forward_matches_model_forward(arch):
    model = random_model(arch)
    cfg = model.config
    bs, nb = 16, 64
    tables = torch.randperm(nb).view(4, 16).int()
    g = torch.Generator().manual_seed(1)
    ctx, qlens = [0, 0, 0, 0], [37, 5, 64, 1]
    ids = torch.randint(0, cfg.vocab_size, (sum(qlens),), generator=g).cuda()
    pos, meta = step_meta(ctx, qlens, tables, bs)
    caches_ref, caches_new = new_caches(cfg, nb, bs), new_caches(cfg, nb, bs)
    with torch.inference_mode():
        ref = model(ids, pos, caches_ref, meta, TorchRefBackend())
        out = fused_forward(model, ids, pos, caches_new, meta, TritonAttentionBackend())
        lref = model.compute_logits(ref).argmax(-1)
        lout = model.compute_logits(out).argmax(-1)
    rel = float((out.float() - ref.float()).norm() / ref.float().norm())
    assert rel < 2e-2, rel
    for (k1, v1), (k2, v2) in zip(caches_ref, caches_new, strict=True):
        assert float((k1.float() - k2.float()).norm() / k1.float().norm()) < 2e-2
        assert float((v1.float() - v2.float()).norm() / v1.float().norm()) < 2e-2
    # random weights give flat logits: bf16-level differences may flip near-ties
    assert (lref == lout).float().mean() > 0.9


def test_cuda_graph_decode_matches_eager_and_pads_buckets():
    model = random_model("qwen3", seed=2)
    cfg = model.config
    bs, nb = 16, 128
    tables = torch.randperm(nb).view(8, 16).int()
    caches = new_caches(cfg, nb, bs)
    backend = TritonAttentionBackend()
    gpu = GpuForward(
        model,
        caches,
        backend,
        max_batch=8,
        max_blocks_per_seq=16,
        max_seq_len_hint=256,
        buckets=(1, 2, 4, 8),
    )
    g = torch.Generator().manual_seed(3)
    n = 3  # pads to bucket 4
    prompt = [20, 45, 3]
    ids = torch.randint(0, cfg.vocab_size, (sum(prompt),), generator=g).cuda()
    pos, meta = step_meta([0] * n, prompt, tables[:n], bs)
    gpu.forward(ids, pos, meta)  # the prompts: a prefill graph
    eager_caches = [(k.clone(), v.clone()) for k, v in caches]
    ctx = list(prompt)
    for _ in range(4):
        ids = torch.randint(0, cfg.vocab_size, (n,), generator=g).cuda()
        pos, meta = step_meta(ctx, [1] * n, tables[:n], bs)
        with torch.inference_mode():
            eager = fused_forward(model, ids, pos, eager_caches, meta, backend)
        graphed = gpu.forward(ids, pos, meta).clone()
        assert 4 in gpu.graphs
        rel = float((graphed.float() - eager.float()).norm() / eager.float().norm())
        assert rel < 1e-2, rel
        ctx = [c + 1 for c in ctx]
    used = tables[:n].flatten().long()
    unused = torch.ones(nb, dtype=torch.bool)
    unused[used] = False
    for (k1, v1), (k2, _) in zip(caches, eager_caches, strict=True):
        # GEMMs at M=4 vs M=3 may round differently: close, not bit-equal
        assert float((k1.float() - k2.float()).norm() / k2.float().norm()) < 1e-2
        assert (k1[unused.cuda()] == 0).all() and (
            v1[unused.cuda()] == 0
        ).all()  # padding wrote nothing


@pytest.mark.parametrize("ctx,qlen", [(0, 37), (0, 128), (45, 70), (0, 2)])
def test_cuda_graph_prefill_matches_eager_and_pads_write_nothing(ctx, qlen):
    """One sequence's prefill (from the start, or a later chunk over cached context) replayed from
    its padded bucket's graph: the rows and the cache it writes match the eager forward."""
    model = random_model("qwen3", seed=4)
    cfg = model.config
    bs, nb = 16, 64
    tables = torch.randperm(nb)[:16].view(1, 16).int()
    backend = TritonAttentionBackend()
    caches = new_caches(cfg, nb, bs)
    gpu = GpuForward(
        model, caches, backend, max_batch=4, max_blocks_per_seq=16, max_seq_len_hint=256
    )
    g = torch.Generator().manual_seed(5)
    if ctx:  # the earlier chunk, eager on both sides' caches
        ids0 = torch.randint(0, cfg.vocab_size, (ctx,), generator=g).cuda()
        pos0, meta0 = step_meta([0], [ctx], tables, bs)
        with torch.inference_mode():
            fused_forward(model, ids0, pos0, caches, meta0, backend)
    eager_caches = [(k.clone(), v.clone()) for k, v in caches]
    ids = torch.randint(0, cfg.vocab_size, (qlen,), generator=g).cuda()
    pos, meta = step_meta([ctx], [qlen], tables, bs)
    with torch.inference_mode():
        eager = fused_forward(model, ids, pos, eager_caches, meta, backend)
    graphed = gpu.forward(ids, pos, meta).clone()
    bucket = next(b for b in gpu.prefill_buckets if b >= qlen)
    assert list(gpu.prefill_graphs) == [(bucket, 1)] and not gpu.graphs  # a lone prompt: width 1
    assert graphed.shape == eager.shape
    rel = float((graphed.float() - eager.float()).norm() / eager.float().norm())
    assert rel < 1e-2, rel  # GEMMs of the padded height may round differently: close, not bit-equal
    unused = torch.ones(nb, dtype=torch.bool)
    unused[tables.flatten().long()] = False
    for (k1, v1), (k2, v2) in zip(caches, eager_caches, strict=True):
        assert float((k1.float() - k2.float()).norm() / k2.float().norm()) < 1e-2
        assert float((v1.float() - v2.float()).norm() / v2.float().norm()) < 1e-2
        assert (k1[unused.cuda()] == 0).all() and (
            v1[unused.cuda()] == 0
        ).all()  # padding wrote nothing
    # the same step again (it rewrites the same K/V): the same bits
    assert torch.equal(gpu.forward(ids, pos, meta), graphed)


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_mixed_step_replays_the_wide_prefill_graph_like_eager(arch):
    """Decode rows, fresh prompts and a later chunk over cached context in one step, padded to
    the graph's tokens and sequences: the rows and the cache match the eager forward, the
    padding writes nothing, a replay is bit-stable."""
    model = random_model(arch, seed=8)
    cfg = model.config
    bs, nb = 16, 96
    tables = torch.randperm(nb)[:48].view(6, 8).int()
    backend = TritonAttentionBackend()
    caches = new_caches(cfg, nb, bs)
    gpu = GpuForward(
        model, caches, backend, max_batch=8, max_blocks_per_seq=8, max_seq_len_hint=128
    )
    g = torch.Generator().manual_seed(9)
    ctx = [30, 77, 0, 0, 40, 0]  # the first two decode, the fifth continues its prompt
    qlens = [1, 1, 25, 3, 50, 9]
    for i in (0, 1, 4):  # their earlier tokens, eagerly into both caches
        ids0 = torch.randint(0, cfg.vocab_size, (ctx[i],), generator=g).cuda()
        pos0, meta0 = step_meta([0], [ctx[i]], tables[i : i + 1], bs)
        with torch.inference_mode():
            fused_forward(model, ids0, pos0, caches, meta0, backend)
    eager_caches = [(k.clone(), v.clone()) for k, v in caches]
    ids = torch.randint(0, cfg.vocab_size, (sum(qlens),), generator=g).cuda()
    pos, meta = step_meta(ctx, qlens, tables, bs)
    with torch.inference_mode():
        eager = fused_forward(model, ids, pos, eager_caches, meta, backend)
    graphed = gpu.forward(ids, pos, meta).clone()
    assert list(gpu.prefill_graphs) == [(128, 8)] and not gpu.graphs  # 89 tokens, 6 of 8 sequences
    rel = float((graphed.float() - eager.float()).norm() / eager.float().norm())
    assert rel < 1e-2, rel
    # every sequence's rows, the decode rows included: both run those on the split-K decode
    # kernel, but with split counts for 8 rows (graph) and for 2 (eager), and the GEMMs at
    # padded heights, so one row may differ by ~1 % after three layers; a row that read the
    # wrong context would be off by ~100 %
    for r in range(len(qlens)):
        rows = slice(sum(qlens[:r]), sum(qlens[: r + 1]))
        rel = float(
            (graphed[rows].float() - eager[rows].float()).norm() / eager[rows].float().norm()
        )
        assert rel < 3e-2, (r, rel)
    unused = torch.ones(nb, dtype=torch.bool)
    unused[tables.flatten().long()] = False
    for (k1, v1), (k2, v2) in zip(caches, eager_caches, strict=True):
        assert float((k1.float() - k2.float()).norm() / k2.float().norm()) < 1e-2
        assert float((v1.float() - v2.float()).norm() / v2.float().norm()) < 1e-2
        assert (k1[unused.cuda()] == 0).all() and (v1[unused.cuda()] == 0).all()
    assert torch.equal(gpu.forward(ids, pos, meta), graphed)


def test_steps_wider_than_the_graph_or_with_long_decode_rows_run_eagerly(monkeypatch):
    import serving.engine.worker.graph_buckets as graph_buckets

    model = random_model("llama", seed=6)
    cfg = model.config
    bs, nb = 16, 64
    tables = torch.randperm(nb)[:15].view(3, 5).int()
    backend = TritonAttentionBackend()
    gpu = GpuForward(
        model,
        new_caches(cfg, nb, bs),
        backend,
        max_batch=2,
        max_blocks_per_seq=5,
        max_seq_len_hint=80,
    )
    ids = torch.randint(0, cfg.vocab_size, (60,), generator=torch.Generator().manual_seed(7)).cuda()
    pos, meta = step_meta([0, 0, 0], [20, 30, 10], tables, bs)
    gpu.forward(ids, pos, meta)  # three sequences, the graph holds two
    assert not gpu.prefill_graphs and not gpu.graphs
    monkeypatch.setattr(graph_buckets, "GRAPHED_DECODE_CONTEXT", 32)
    pos, meta = step_meta([40, 0], [1, 30], tables[:2], bs)
    gpu.forward(ids[:31], pos, meta)  # its decode row reads 41 tokens: past the limit
    assert not gpu.prefill_graphs


def test_engine_captures_every_bucket_at_start_and_none_while_serving():
    from serving.engine import build_engine
    from serving.engine.config import EngineConfig
    from serving.loader.random_weights import random_loaded
    from serving.sampling_params import SamplingParams
    from vigil.devtools.model_shapes import SHAPES

    cfg = EngineConfig(
        device="cuda",
        dtype="bfloat16",
        block_size=16,
        num_kv_blocks=128,
        max_num_seqs=6,
        enable_prefix_caching=False,
    )
    engine = build_engine(cfg, loaded=random_loaded(SHAPES["smollm2-135m"], seed=0, device="cuda"))
    graphs = engine.runner.gpu.graphs
    assert sorted(graphs) == [1, 2, 4, 8]  # 6 sequences use bucket 8
    assert sorted(engine.runner.gpu.prefill_graphs) == [
        (b, w) for b in PREFILL_BUCKETS for w in (1, 6)
    ]
    captured = {b: id(g) for b, (g, _) in graphs.items()}
    captured_prefill = {b: id(g) for b, (g, _) in engine.runner.gpu.prefill_graphs.items()}
    for i in range(5):
        engine.add_request(
            str(i), list(range(10 + i, 30 + i)), SamplingParams(max_tokens=6 + i, ignore_eos=True)
        )
    while engine.has_unfinished_requests():
        engine.step()
    assert {b: id(g) for b, (g, _) in engine.runner.gpu.graphs.items()} == captured
    assert {b: id(g) for b, (g, _) in engine.runner.gpu.prefill_graphs.items()} == captured_prefill

    off = build_engine(
        EngineConfig(
            device="cuda",
            dtype="bfloat16",
            block_size=16,
            num_kv_blocks=64,
            max_num_seqs=4,
            capture_graphs_at_start=False,
            warm_up_at_start=False,
        ),
        loaded=random_loaded(SHAPES["smollm2-135m"], seed=0, device="cuda"),
    )
    assert off.runner.gpu.graphs == {} and off.runner.gpu.prefill_graphs == {}
