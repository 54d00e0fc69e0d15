"""The one-shot symmetric-memory all-reduce on 2 GPUs, and TP=2 engines with it and async
scheduling (NCCL's all-reduce is the reference).

- The one-shot result equals NCCL's (bf16 tolerance) for decode- and prefill-sized messages,
  eagerly and replayed from a CUDA graph; a message over the buffer goes to NCCL.
- A TP=2 engine picks symm_mem under "auto"; its greedy tokens with async scheduling on equal
  those with it off (graphs on), and those of a TP=2 engine on NCCL; its logprobs of its own
  greedy tokens match TP=1 scoring them teacher-forced (bf16 sums in another order: token
  equality with TP=1 is not expected of random weights).

    pytest tests/serving/gpu/test_tp_all_reduce_gpu.py -q
"""

from __future__ import annotations

import pytest
import torch
import torch.multiprocessing as mp

from serving.distributed.source import ModelSource
from serving.engine import build_engine
from serving.engine.config import EngineConfig
from serving.engine.engine.llm_engine import LLMEngine
from serving.loader.random_weights import random_loaded
from serving.sampling_params import SamplingParams
from vigil.devtools.model_shapes import SMOLLM2_135M

pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA devices")
HIDDEN = 2560
ROWS = (1, 3, 16, 64, 102)  # 102 x 2560 bf16 = 522 KB: just inside the 512 KiB buffer
PROMPT, NEW = 40, 24


def _ranks(rank: int, port: int) -> None:
    import torch.distributed as dist

    from serving.distributed.all_reduce import with_all_reduce
    from serving.distributed.group import init_group

    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    tp = with_all_reduce(
        init_group(rank, 2, port, device), "symm_mem", device, torch.bfloat16, 8192, HIDDEN
    )
    assert tp.all_reduce_name == "symm_mem", tp.all_reduce_name
    g = torch.Generator(device=device).manual_seed(rank)
    for rows in (*ROWS, 400):  # 400 rows: over the buffer, NCCL
        x = torch.randn(rows, HIDDEN, generator=g, device=device, dtype=torch.bfloat16)
        ref = x.clone()
        dist.all_reduce(ref, group=tp.group)
        torch.testing.assert_close(tp.all_reduce(x.clone()), ref, atol=2e-2, rtol=1e-2)
    # inside a CUDA graph: captured once, replayed on new inputs
    x = torch.zeros(16, HIDDEN, device=device, dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        tp.all_reduce(x.clone())
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = tp.all_reduce(x)
    for _ in range(3):
        x.copy_(torch.randn(16, HIDDEN, generator=g, device=device, dtype=torch.bfloat16))
        graph.replay()
        ref = x.clone()
        dist.all_reduce(ref, group=tp.group)
        torch.testing.assert_close(out, ref, atol=2e-2, rtol=1e-2)
    torch.cuda.synchronize()
    del graph
    dist.destroy_process_group()


def test_one_shot_equals_nccl_eager_and_in_graphs():
    from serving.distributed.group import free_port

    mp.spawn(_ranks, args=(free_port(),), nprocs=2, join=True)


def _engine(tp: int, async_scheduling: str, tp_allreduce: str = "auto") -> LLMEngine:
    cfg = EngineConfig(
        device="cuda",
        dtype="bfloat16",
        block_size=16,
        num_kv_blocks=256,
        max_num_seqs=8,
        max_num_batched_tokens=4096,
        enable_prefix_caching=False,
        tensor_parallel_size=tp,
        async_scheduling=async_scheduling,
        tp_allreduce=tp_allreduce,
    )
    shape = SMOLLM2_135M
    loaded = (
        random_loaded(shape, seed=1, device="cuda")
        if tp == 1
        else ModelSource(random_config=dict(shape), seed=1)
    )
    return build_engine(cfg, loaded=loaded)


def _run(engine: LLMEngine, requests, late=()) -> dict:
    finals = {}
    try:
        for rid, ids, params in requests:
            engine.add_request(rid, ids, params)
        step = 0
        while engine.has_unfinished_requests():
            if step == 3:  # a join mid-run: pending rows out of steady order
                for rid, ids, params in late:
                    engine.add_request(rid, ids, params)
            for out in engine.step():
                if out.finished:
                    finals[out.request_id] = out
            step += 1
    finally:
        engine.close()
    return finals


def _tokens(finals: dict) -> dict:
    return {rid: [list(c.token_ids) for c in out.outputs] for rid, out in finals.items()}


def test_tp2_symm_mem_async_tokens():
    g = torch.Generator().manual_seed(0)
    prompts = torch.randint(0, SMOLLM2_135M["vocab_size"], (5, PROMPT), generator=g).tolist()
    gen = SamplingParams(max_tokens=NEW, temperature=0.0, ignore_eos=True, logprobs=0)
    first = [(str(i), p, gen) for i, p in enumerate(prompts[:4])]
    late = [
        (
            "late",
            prompts[4][:17],
            SamplingParams(max_tokens=NEW // 2, temperature=0.0, ignore_eos=True),
        )
    ]
    engine = _engine(2, "on")
    assert engine.async_scheduling and engine.tensor_parallel.all_reduce_name == "symm_mem"
    on = _run(engine, first, late)
    off = _run(_engine(2, "off"), first, late)
    nccl = _run(_engine(2, "on", "nccl"), first, late)
    assert _tokens(on) == _tokens(off)
    assert _tokens(on) == _tokens(nccl)
    score = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True, prompt_logprobs=0)
    full = {rid: p + list(on[rid].outputs[0].token_ids) for rid, p, _ in first}
    refs = _run(_engine(1, "on"), [(rid, ids, score) for rid, ids in full.items()])
    diffs = torch.cat(
        [
            (
                torch.tensor([t.logprob for t in on[rid].outputs[0].logprobs])
                - torch.tensor([t.logprob for t in refs[rid].prompt_logprobs[PROMPT:]])
            ).abs()
            for rid in full
        ]
    )
    assert diffs.max() < 0.25 and diffs.mean() < 0.05, (diffs.max(), diffs.mean())
