"""Tensor parallelism on 2 GPUs (NCCL, CUDA graphs on): TP=2 against TP=1 on the same random
weights of real shapes (SmolLM2-135M: 9 heads over 2 ranks, an uneven split; Qwen3-4B).

bf16 sums in another order, so greedy tokens of near-uniform random models may part ways; the
checks are on logprobs instead: TP=2's prompt logprobs (prefill) and the logprobs of its own
greedy tokens (decode steps, replayed from graphs with the all-reduces inside) against TP=1
scoring the same tokens teacher-forced.

    pytest tests/serving/gpu/test_tp_gpu.py -q
"""

from __future__ import annotations

import pytest
import torch

from serving.distributed.source import ModelSource
from serving.engine import build_engine
from serving.engine.config import EngineConfig
from serving.engine.engine.llm_engine import LLMEngine
from serving.loader.random_weights import random_loaded
from serving.sampling_params import SamplingParams
from vigil.devtools.model_shapes import QWEN3_4B, SMOLLM2_135M

pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA devices")
PROMPT, NEW = 48, 24


def _engine(shape: dict, tp: int) -> LLMEngine:
    cfg = EngineConfig(
        device="cuda",
        dtype="bfloat16",
        block_size=16,
        num_kv_blocks=256,
        max_num_seqs=8,
        max_num_batched_tokens=4096,
        enable_prefix_caching=False,
        tensor_parallel_size=tp,
    )
    loaded = (
        random_loaded(shape, seed=1, device="cuda")
        if tp == 1
        else ModelSource(random_config=dict(shape), seed=1)
    )
    return build_engine(cfg, loaded=loaded)


def _run(engine: LLMEngine, requests: list[tuple[str, list[int], SamplingParams]]) -> dict:
    for rid, ids, params in requests:
        engine.add_request(rid, ids, params)
    finals = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                finals[out.request_id] = out
    return finals


@pytest.mark.parametrize("shape", [SMOLLM2_135M, QWEN3_4B], ids=["smollm2-135m", "qwen3-4b"])
def test_tp2_logprobs_match_tp1(shape):
    g = torch.Generator().manual_seed(0)
    prompts = torch.randint(0, shape["vocab_size"], (4, PROMPT), generator=g).tolist()
    gen = SamplingParams(max_tokens=NEW, temperature=0.0, ignore_eos=True, logprobs=0)
    engine = _engine(shape, 2)
    try:
        outs = _run(engine, [(str(i), p, gen) for i, p in enumerate(prompts)])
    finally:
        engine.close()
    engine = _engine(shape, 1)
    score = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True, prompt_logprobs=0)
    full = {str(i): p + list(outs[str(i)].outputs[0].token_ids) for i, p in enumerate(prompts)}
    refs = _run(engine, [(rid, ids, score) for rid, ids in full.items()])
    diffs = []
    for rid, out in outs.items():
        tp2 = torch.tensor([t.logprob for t in out.outputs[0].logprobs])
        tp1 = torch.tensor([t.logprob for t in refs[rid].prompt_logprobs[PROMPT:]])
        diffs.append((tp2 - tp1).abs())
    diffs = torch.cat(diffs)
    assert diffs.max() < 0.25 and diffs.mean() < 0.05, (diffs.max(), diffs.mean())


def test_tp2_close_is_prompt_and_a_new_group_can_start():
    """Closing leaves the NCCL group on every rank without waiting on the others (a destroy
    finalized the communicators and hung here), the workers exit, and the same process can
    start a group again."""
    import time

    import torch.distributed as dist

    for _ in range(2):
        engine = _engine(SMOLLM2_135M, 2)
        _run(
            engine,
            [("a", [1, 2, 3, 4], SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True))],
        )
        workers = engine.tensor_parallel.workers.procs
        t0 = time.monotonic()
        engine.close()
        assert time.monotonic() - t0 < 20.0
        assert all(p.poll() is not None for p in workers)
        assert not dist.is_initialized()
