"""Prompt logprobs (the engine side of `/v1/completions` `echo` + `logprobs`) on the real SmolLM2,
checked against an independent log_softmax of HF transformers' logits over the same tokens:
through chunked prefill mixed with another request's decodes, after a prefix-cache warm-up, and
through the HTTP API with the legacy response shape (first prompt token null)."""

from __future__ import annotations

import httpx
import pytest
import torch
from engine_fixtures import run_to_completion
from test_server_support import API_KEY, ServerThread, make_settings, shared_engine

from serving.engine import EngineConfig, LLMEngine
from serving.sampling_params import SamplingParams
from serving.server.service.app import create_app

TEXT = (
    "The quick brown fox jumps over the lazy dog. A journey of a thousand miles begins with a "
    "single step. Knowledge is power, and time is money."
)


@pytest.fixture(scope="module")
def engine(smollm2_loaded):
    torch.set_num_threads(1)
    # budget 12 < the prompt: its prefill runs in chunks beside the other request's decodes
    return LLMEngine(
        EngineConfig(device="cpu", kv_cache_memory_mb=16, max_num_batched_tokens=12),
        loaded=smollm2_loaded,
    )


def hf_prompt_logprobs(hf_model, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        logits = hf_model(torch.tensor([ids])).logits[0].double()
    ref = torch.log_softmax(logits, dim=-1)[:-1]  # row t scores token t + 1
    return ref


def test_prompt_logprobs_match_hf_through_chunks_and_a_warm_prefix_cache(engine, hf_smollm2):
    ids = engine.tokenizer.encode(TEXT)
    assert len(ids) > 2 * 12  # at least three chunks
    ref = hf_prompt_logprobs(hf_smollm2, ids)
    other = engine.tokenizer.encode("Count to ten.")
    asked = SamplingParams(max_tokens=2, temperature=0.0, prompt_logprobs=3)
    plain = SamplingParams(max_tokens=6, temperature=0.0)
    # first the same prompt without prompt logprobs fills the prefix cache; the asking request
    # must still score every position (cached blocks carry no logits)
    run_to_completion(engine, {0: [("warm", ids, plain)]})
    finals = run_to_completion(engine, {0: [("o", other, plain)], 1: [("p", ids, asked)]})
    out = finals["p"]
    assert out.metrics.num_cached_prompt_tokens == 0
    scored = out.prompt_logprobs
    assert scored is not None and len(scored) == len(ids) and scored[0] is None
    for t, entry in enumerate(scored[1:]):
        assert entry.token_id == ids[t + 1]
        assert entry.logprob == pytest.approx(ref[t, ids[t + 1]].item(), abs=2e-3)
        assert [alt[0] for alt in entry.top] == ref[t].topk(3).indices.tolist()
    assert finals["o"].prompt_logprobs is None  # not asked


def test_preempted_request_scores_each_prompt_token_once(engine):
    ids = engine.tokenizer.encode(TEXT)
    params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
    once = run_to_completion(engine, {0: [("a", ids, params)]})["a"].prompt_logprobs
    req_rows: list = []
    engine.add_request("b", ids, params)
    req = engine.requests["b"]
    engine.step()  # first chunk scored
    engine.scheduler.running.remove(req.seqs[0])
    engine.scheduler._preempt(req.seqs[0])  # recomputed from the start
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                req_rows = out.prompt_logprobs
    assert [e.logprob for e in req_rows[1:]] == [e.logprob for e in once[1:]]
    assert engine.runner.prompt_logprob_requests == set()  # finished requests leave the scan set


def test_echo_with_logprobs_over_http(hf_smollm2):
    settings = make_settings()
    app = create_app(settings, engine=shared_engine(), log_traffic=False)
    with ServerThread(app) as srv:
        r = httpx.post(
            f"{srv.url}/v1/completions",
            headers={"Authorization": f"Bearer {API_KEY}"},
            json={
                "model": settings.model_name,
                "prompt": TEXT,
                "echo": True,
                "logprobs": 1,
                "max_tokens": 2,
                "temperature": 0.0,
            },
            timeout=120,
        )
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    ids = shared_engine().tokenizer.encode(TEXT)
    lp = choice["logprobs"]
    assert choice["text"].startswith(TEXT) and len(choice["text"]) > len(TEXT)
    assert len(lp["tokens"]) == len(ids) + 2
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    assert "".join(lp["tokens"][: len(ids)]) == TEXT
    assert lp["text_offset"][: len(ids) + 1] == [
        0,
        *[len("".join(lp["tokens"][:t])) for t in range(1, len(ids) + 1)],
    ]
    ref = hf_prompt_logprobs(hf_smollm2, ids)
    for t in range(1, len(ids)):
        assert lp["token_logprobs"][t] == pytest.approx(ref[t - 1, ids[t]].item(), abs=2e-3)
