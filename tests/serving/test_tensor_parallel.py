"""Tensor parallelism on CPU (gloo, 2 processes: this test process is the driver, rank 0, and one
worker subprocess is rank 1): a tiny random Llama and Qwen3 at TP=2 give the same greedy tokens
as TP=1, with logprobs of the sampled and prompt tokens within 1e-4; and the case of fewer KV
heads than ranks (each KV head replicated)."""

from __future__ import annotations

import pytest
import torch
from engine_fixtures import greedy, make_engine, run_to_completion, save_tiny_model
from test_tensor_parallel_sharding import save_single_kv_head_llama

from serving.distributed.partition import HeadShard, head_shard
from serving.loader import load_model_files
from serving.sampling_params import SamplingParams

PROMPT_LENS = (3, 9, 17, 30)
NEW_TOKENS = 12


def _prompts(seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 256, (n,), generator=g).tolist() for n in PROMPT_LENS]


def _requests(prompts):
    reqs = [(str(i), p, greedy(NEW_TOKENS, logprobs=3)) for i, p in enumerate(prompts)]
    # prompt logprobs: extra logits calls the workers are told about
    scored = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True, prompt_logprobs=2)
    reqs.append(("scored", prompts[2], scored))
    return reqs


def _run(path, tp: int, **overrides):
    engine = make_engine(
        load_model_files(path),
        max_num_batched_tokens=20,
        tensor_parallel_size=tp,
        torch_threads=1,
        **overrides,
    )
    try:
        # a later arrival joins a running batch; a fork (n=2) shares blocks (copy-on-write)
        prompts = _prompts()
        arrivals = {0: _requests(prompts[:3]), 5: [("late", prompts[3], greedy(NEW_TOKENS, n=2))]}
        return run_to_completion(engine, arrivals)
    finally:
        engine.close()


def _assert_same(single, parallel):
    assert single.keys() == parallel.keys()
    for rid, ref in single.items():
        got = parallel[rid]
        for a, b in zip(ref.outputs, got.outputs, strict=True):
            assert list(b.token_ids) == list(a.token_ids), rid
            if a.logprobs is not None:
                ours = torch.tensor([t.logprob for t in b.logprobs])
                torch.testing.assert_close(
                    ours, torch.tensor([t.logprob for t in a.logprobs]), atol=1e-4, rtol=0
                )
                assert [[i for i, _, _ in t.top] for t in b.logprobs] == [
                    [i for i, _, _ in t.top] for t in a.logprobs
                ]
        if ref.prompt_logprobs is not None:
            ref_lp = torch.tensor([t.logprob for t in ref.prompt_logprobs[1:]])
            got_lp = torch.tensor([t.logprob for t in got.prompt_logprobs[1:]])
            torch.testing.assert_close(got_lp, ref_lp, atol=1e-4, rtol=0)


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_tp2_matches_tp1(arch, tmp_path):
    torch.set_num_threads(1)
    save_tiny_model(arch, tmp_path, seed=5)
    _assert_same(_run(tmp_path, 1), _run(tmp_path, 2))


def test_replicated_kv_head(tmp_path):
    """One KV head, two ranks: both hold KV head 0, each with two of the four query heads."""
    torch.set_num_threads(1)
    save_single_kv_head_llama(tmp_path)
    assert [head_shard(4, 1, 2, r) for r in (0, 1)] == [
        HeadShard(0, 2, 0, 1),
        HeadShard(2, 2, 0, 1),
    ]
    _assert_same(_run(tmp_path, 1), _run(tmp_path, 2))


def test_serve_flag_and_setting_reach_the_engine_config(monkeypatch):
    from serving.engine.config import EngineConfig
    from vigil.cli.main import build_parser
    from vigil.config import Settings

    assert (
        build_parser().parse_args(["serve", "--tensor-parallel-size", "2"]).tensor_parallel_size
        == 2
    )
    monkeypatch.setenv("VIGIL_TENSOR_PARALLEL_SIZE", "4")
    assert EngineConfig.from_settings(Settings()).tensor_parallel_size == 4
    assert EngineConfig().tensor_parallel_size == 1


def test_unsplittable_shape_fails_before_any_process_starts(tmp_path):
    save_tiny_model("llama", tmp_path, seed=1)  # 2 KV heads cannot be spread over 3 ranks
    with pytest.raises(ValueError, match="multiple of num_key_value_heads"):
        make_engine(load_model_files(tmp_path), tensor_parallel_size=3)


# starts real OS processes: left out by make test-fast
pytestmark = pytest.mark.processes
