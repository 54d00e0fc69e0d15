"""Acceptance on the real default model: SmolLM2-135M-Instruct from the shipped GGUF, served by our
engine (paged KV, continuous batching, chunked prefill), against HF transformers on the same GGUF:
greedy tokens identical for 32 tokens, logprobs equal to an independent log_softmax of HF's logits,
and the same seed giving the same text however requests are batched."""

from __future__ import annotations

import pytest
import torch
from engine_fixtures import run_to_completion

from serving.engine import EngineConfig, LLMEngine
from serving.sampling_params import SamplingParams

QUESTIONS = [
    "Count to fifty.",
    "Write a short poem about the sea.",
    "Explain why the sky is blue to a ten year old.",
    "List five fruits and describe the color and taste of each one in a full sentence.",
    "You are a travel guide. Describe a three day trip to Rome, with a plan for the morning, "
    "the afternoon and the evening of each day, and say what to eat.",
]


@pytest.fixture(scope="module")
def engine(smollm2_loaded):
    torch.set_num_threads(1)  # robust when other test processes share the cores
    # budget 48 < the longest prompt: chunked prefill mixes with the other requests' decodes
    cfg = EngineConfig(device="cpu", kv_cache_memory_mb=32, max_num_batched_tokens=48)
    return LLMEngine(cfg, loaded=smollm2_loaded)


@pytest.fixture(scope="module")
def prompts(engine):
    tok = engine.tokenizer
    return [
        tok.encode(
            tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True)
        )
        for q in QUESTIONS
    ]


def test_greedy_32_tokens_match_hf_generate(engine, prompts, hf_smollm2):
    assert len({len(p) for p in prompts}) == len(prompts)  # different lengths
    params = SamplingParams(max_tokens=32, temperature=0.0)
    finals = run_to_completion(engine, {0: [(str(i), p, params) for i, p in enumerate(prompts)]})
    for i, p in enumerate(prompts):
        ids = torch.tensor([p])
        with torch.inference_mode():
            ref = hf_smollm2.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=32, do_sample=False
            )
        ours = finals[str(i)].outputs[0]
        assert ours.token_ids == ref[0, len(p) :].tolist(), f"prompt {i}: {ours.text!r}"
        assert len(ours.token_ids) == 32 and ours.finish_reason == "length"


def test_logprobs_match_hf_log_softmax(engine, prompts, hf_smollm2):
    p = prompts[2]
    params = SamplingParams(max_tokens=12, temperature=0.7, seed=5, logprobs=5)
    out = run_to_completion(engine, {0: [("lp", p, params)]})["lp"].outputs[0]
    with torch.inference_mode():
        logits = hf_smollm2(torch.tensor([p + out.token_ids])).logits[0].double()
    ref = torch.log_softmax(logits, dim=-1)[len(p) - 1 : -1]  # row t predicts token t + 1
    for t, entry in enumerate(out.logprobs):
        assert entry.token_id == out.token_ids[t]
        assert entry.logprob == pytest.approx(ref[t, entry.token_id].item(), abs=2e-3)
        top_ids = ref[t].topk(5).indices.tolist()
        assert [alt[0] for alt in entry.top] == top_ids
        for tid, _text, lp in entry.top:
            assert lp == pytest.approx(ref[t, tid].item(), abs=2e-3)
    entropy = -(ref.exp() * ref).sum(-1).mean().item()
    assert out.mean_entropy == pytest.approx(entropy, abs=1e-2)


def test_same_seed_same_text_regardless_of_batch(engine, prompts):
    params = SamplingParams(max_tokens=12, temperature=0.9, top_p=0.95, seed=1234)
    alone = run_to_completion(engine, {0: [("s", prompts[1], params)]})["s"].outputs[0]
    others = [
        (f"o{i}", p, SamplingParams(max_tokens=4, temperature=1.0)) for i, p in enumerate(prompts)
    ]
    mixed = run_to_completion(
        engine, {0: others[:2], 2: [("s", prompts[1], params)], 3: others[2:3]}
    )
    assert mixed["s"].outputs[0].text == alone.text and alone.text
    other_seed = SamplingParams(max_tokens=12, temperature=0.9, top_p=0.95, seed=4321)
    differs = run_to_completion(engine, {0: [("d", prompts[1], other_seed)]})["d"].outputs[0]
    assert differs.token_ids != alone.token_ids


def test_stop_string_eos_and_text(engine):
    tok = engine.tokenizer
    p = tok.encode(
        tok.apply_chat_template(
            [{"role": "user", "content": "What is the capital of France?"}],
            add_generation_prompt=True,
        )
    )
    natural = run_to_completion(
        engine, {0: [("eos", p, SamplingParams(max_tokens=32, temperature=0.0))]}
    )
    c = natural["eos"].outputs[0]
    assert c.text == "The capital of France is Paris." == tok.decode(c.token_ids)
    assert (c.finish_reason, c.stop_reason) == ("stop", None) and c.token_ids[
        -1
    ] in engine.eos_token_ids
    stopped = run_to_completion(
        engine, {0: [("s", p, SamplingParams(max_tokens=32, temperature=0.0, stop=["Paris"]))]}
    )
    s = stopped["s"].outputs[0]
    assert (s.text, s.finish_reason, s.stop_reason) == (
        "The capital of France is ",
        "stop",
        "Paris",
    )
