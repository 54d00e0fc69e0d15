"""Decode graphs that end with the lm_head and the sampler's statistics
(serving/engine/worker/graph_logits.py):
the logits match the eager lm_head, the statistics are logit_stats of those logits, the sampler
given them samples what it samples from the logits alone, and the engine's tokens and logprobs
are the same with the tail in the graph and without."""

from __future__ import annotations

import pytest
import torch
from gpu_model_ref import new_caches, random_model, step_meta

from serving.attention.triton_backend import TritonAttentionBackend
from serving.engine.worker.cuda_graphs import GpuForward
from serving.engine.worker.token_sampler import sample_on_device
from serving.kernels.fused_forward import fused_forward
from serving.kernels.logit_stats import logit_stats
from serving.sampling_params import SamplingParams

pytestmark = pytest.mark.gpu


def _decode_setup(n: int, ctx: int = 20):
    model = random_model("llama", seed=5)
    cfg = model.config
    bs, nb = 16, 128
    tables = torch.randperm(nb).view(8, 16).int()
    caches = new_caches(cfg, nb, bs)
    gpu = GpuForward(
        model,
        caches,
        TritonAttentionBackend(),
        max_batch=8,
        max_blocks_per_seq=16,
        max_seq_len_hint=256,
        buckets=(1, 2, 4, 8),
        prefill_buckets=(),
        graphed_logits=True,
    )
    g = torch.Generator().manual_seed(6)
    for i in range(n):  # each sequence's context, written eagerly
        ids = torch.randint(0, cfg.vocab_size, (ctx,), generator=g).cuda()
        pos, meta = step_meta([0], [ctx], tables[i : i + 1], bs)
        with torch.inference_mode():
            fused_forward(model, ids, pos, caches, meta, gpu.backend)
    ids = torch.randint(0, cfg.vocab_size, (n,), generator=g).cuda()
    pos, meta = step_meta([ctx] * n, [1] * n, tables[:n], bs)
    return model, gpu, ids, pos, meta


def test_graph_logits_and_stats_match_the_eager_lm_head():
    n = 3  # bucket 4: one padded row
    model, gpu, ids, pos, meta = _decode_setup(n)
    eager_caches = [(k.clone(), v.clone()) for k, v in gpu.kv_caches]
    with torch.inference_mode():
        eager_hidden = fused_forward(model, ids, pos, eager_caches, meta, gpu.backend)
        eager_logits = model.compute_logits(eager_hidden)
    assert gpu.sampled_rows(n) is None  # nothing replayed yet
    gpu.forward(ids, pos, meta)
    assert 4 in gpu.graphs
    assert gpu.sampled_rows(n + 1) is None  # another row count: not this replay's
    logits, (lse, greedy, packed) = gpu.sampled_rows(n)
    assert logits.shape == (n, model.config.vocab_size) and logits.dtype == torch.bfloat16
    rel = float((logits.float() - eager_logits).norm() / eager_logits.norm())
    assert rel < 2e-2, rel
    ref_lse, ref_ids, ref_packed = logit_stats(
        logits.float()
    )  # the statistics of the graph's logits
    assert torch.equal(greedy, ref_ids)
    torch.testing.assert_close(lse, ref_lse, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(packed, ref_packed, rtol=1e-6, atol=1e-5)
    pos2, meta2 = step_meta([0], [5], meta.block_tables[:1].cpu(), 16)
    gpu.forward(ids[:1].repeat(5), pos2, meta2)  # a prefill (eager here): no decode graph's rows
    assert gpu.sampled_rows(n) is None and gpu.sampled_rows(5) is None


@pytest.mark.parametrize("kind", ["greedy", "temperature", "logprobs"])
def test_sampling_with_graph_stats_equals_sampling_the_logits(kind):
    n = 4
    _, gpu, ids, pos, meta = _decode_setup(n)
    gpu.forward(ids, pos, meta)
    logits, stats = gpu.sampled_rows(n)
    if kind == "greedy":
        params = [SamplingParams(temperature=0.0)] * n
    elif kind == "temperature":
        params = [SamplingParams(temperature=0.9, top_p=0.9, seed=i) for i in range(n)]
    else:
        params = [SamplingParams(temperature=0.0, logprobs=3)] * n

    def gens():
        return [
            torch.Generator(device="cuda").manual_seed(10 + i) if kind == "temperature" else None
            for i in range(n)
        ]

    with (
        torch.inference_mode()
    ):  # as the runner samples (the graph's outputs are inference tensors)
        with_stats = sample_on_device(logits, params, gens(), [[] for _ in range(n)], stats)
        plain = sample_on_device(logits.float(), params, gens(), [[] for _ in range(n)])
    assert torch.equal(with_stats.token_ids, plain.token_ids)
    torch.testing.assert_close(with_stats.logprobs, plain.logprobs, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(with_stats.entropies, plain.entropies, rtol=1e-6, atol=1e-5)
    if kind == "logprobs":
        assert torch.equal(with_stats.top_indices, plain.top_indices)
        torch.testing.assert_close(with_stats.top_values, plain.top_values, rtol=1e-6, atol=1e-5)


def test_engine_tokens_and_logprobs_are_the_same_with_the_tail_in_the_graph():
    from serving.engine import build_engine
    from serving.engine.config import EngineConfig
    from serving.loader.random_weights import random_loaded
    from vigil.devtools.model_shapes import SHAPES

    def run(graphed: bool) -> dict[str, tuple[list[int], list[float]]]:
        cfg = EngineConfig(
            device="cuda",
            dtype="bfloat16",
            block_size=16,
            num_kv_blocks=128,
            max_num_seqs=6,
            enable_prefix_caching=False,
        )
        engine = build_engine(
            cfg, loaded=random_loaded(SHAPES["smollm2-135m"], seed=1, device="cuda")
        )
        if not graphed:
            engine.runner.gpu.logits = None  # decode graphs recaptured without the tail
            engine.runner.gpu.graphs.clear()
        else:
            assert engine.runner.gpu.logits is not None and engine.runner.gpu.logits.stats
        for i in range(5):  # three ask for logprobs (the sampler casts the logits), two do not
            params = SamplingParams(
                max_tokens=12, temperature=0.0, ignore_eos=True, logprobs=1 if i < 3 else None
            )
            engine.add_request(str(i), list(range(10 + 3 * i, 40 + 3 * i)), params)
        done = {}
        while engine.has_unfinished_requests():
            for out in engine.step():
                if out.finished:
                    c = out.outputs[0]
                    done[out.request_id] = (
                        list(c.token_ids),
                        [e.logprob for e in c.logprobs or []],
                    )
        return done

    with_tail, without = run(True), run(False)
    assert with_tail.keys() == without.keys() == {str(i) for i in range(5)}
    for rid in with_tail:
        tokens, logprobs = with_tail[rid]
        ref_tokens, ref_logprobs = without[rid]
        # the GEMM at the padded bucket height may round the last bf16 bit differently: near-ties
        # may flip, so compare the agreeing prefix
        agree = next(
            (i for i, (a, b) in enumerate(zip(tokens, ref_tokens, strict=True)) if a != b),
            len(tokens),
        )
        assert agree >= 4, (rid, tokens, ref_tokens)
        assert len(logprobs) == len(ref_logprobs) == (12 if int(rid) < 3 else 0)
        torch.testing.assert_close(
            torch.tensor(logprobs[:agree]), torch.tensor(ref_logprobs[:agree]), rtol=0, atol=2e-2
        )
