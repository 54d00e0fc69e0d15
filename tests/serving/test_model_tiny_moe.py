"""Tiny random-weight mixture-of-experts checkpoints written by transformers, loaded by our loader
and served by our engine: greedy tokens identical to HF generate through the offline engine and
through the OpenAI server, and prefill logits within 1e-4 of HF's (float32 on the CPU: the
experts' torch path).

- Qwen3-MoE: 8 experts, top-2, renormalised; one dense layer by `mlp_only_layers`.
- gpt-oss: 8 experts, top-2, biased router and experts, clamped SwiGLU; layers alternating
  sliding (window 8, shorter than most prompts) and full attention; attention sinks; YaRN.
"""

from __future__ import annotations

import httpx
import pytest
import torch
from engine_fixtures import greedy, make_engine, run_to_completion
from moe_fixtures import gpt_oss_config, qwen3_moe_config, save_tiny_moe
from test_server_support import API_KEY, ServerThread, make_settings

from serving.attention.base import AttentionMetadata
from serving.attention.torch_ref import TorchRefBackend
from serving.loader import load_model_files
from serving.model import build_model
from serving.model.moe import SparseMoeBlock

PROMPT_LENS = (1, 9, 30, 47)
NEW_TOKENS = 20
LOGIT_TOLERANCE = 1e-4


CONFIGS = {"qwen3_moe": qwen3_moe_config, "gpt_oss": gpt_oss_config}


@pytest.fixture(scope="module", params=list(CONFIGS))
def tiny(request, tmp_path_factory):
    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp(request.param)
    hf = save_tiny_moe(path, CONFIGS[request.param](), seed=5)
    return hf, load_model_files(path), path


def _prompts(seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 256, (n,), generator=g).tolist() for n in PROMPT_LENS]


@pytest.fixture(scope="module")
def hf_answers(tiny):
    hf = tiny[0]
    answers = []
    for p in _prompts():
        ids = torch.tensor([p])
        with torch.inference_mode():
            ref = hf.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS, do_sample=False
            )
        answers.append(ref[0, len(p) :].tolist())
    return answers


def test_config_and_layers_follow_the_checkpoint(tiny):
    _, loaded, _ = tiny
    config, moe = loaded.config, loaded.config.moe
    model = build_model(config, loaded.state_dict)
    kinds = [isinstance(layer.mlp, SparseMoeBlock) for layer in model.layers]
    if config.arch == "qwen3_moe":
        assert (moe.num_experts, moe.top_k, moe.renormalize) == (8, 2, True)
        assert moe.sparse_layers == (0, 2) and kinds == [True, False, True]
        return
    assert (moe.num_experts, moe.top_k, moe.router_bias, moe.expert_bias) == (8, 2, True, True)
    assert kinds == [True] * 4
    assert [s.sliding_window for s in config.layers()] == [8, None, 8, None]
    assert all(layer.self_attn.sinks is not None for layer in model.layers)


def test_greedy_matches_hf_generate_offline(tiny, hf_answers):
    _, loaded, _ = tiny
    # chunked prefill (budget 20 < longest prompt) and blocks of 4: the paged paths all run, and
    # each step's experts see tokens of several sequences at once
    engine = make_engine(loaded, max_num_batched_tokens=20)
    prompts = _prompts()
    finals = run_to_completion(
        engine, {0: [(str(i), p, greedy(NEW_TOKENS)) for i, p in enumerate(prompts)]}
    )
    for i in range(len(prompts)):
        assert finals[str(i)].outputs[0].token_ids == hf_answers[i], f"prompt {i}"


def test_greedy_matches_hf_generate_through_the_openai_server(tiny, hf_answers):
    from serving.engine import AsyncLLMEngine, EngineConfig, LLMEngine
    from serving.server.service.app import create_app

    _, loaded, path = tiny
    settings = make_settings(model_path=str(path), model_name="tiny-moe")
    engine = AsyncLLMEngine(LLMEngine(EngineConfig.from_settings(settings), loaded=loaded))
    engine.start()
    try:
        app = create_app(settings, engine=engine, log_traffic=False)
        with ServerThread(app) as srv, httpx.Client(base_url=srv.url, timeout=120) as http:
            for i, prompt in enumerate(_prompts()):
                reply = http.post(
                    "/v1/completions",
                    headers={"Authorization": f"Bearer {API_KEY}"},
                    json={
                        "model": "tiny-moe",
                        "prompt": prompt,
                        "max_tokens": NEW_TOKENS,
                        "temperature": 0.0,
                        "ignore_eos": True,
                        "return_token_ids": True,
                    },
                )
                assert reply.status_code == 200, reply.text
                assert reply.json()["choices"][0]["token_ids"] == hf_answers[i], f"prompt {i}"
    finally:
        import asyncio

        asyncio.run(engine.shutdown())


def test_prefill_logits_match_hf(tiny):
    hf, loaded, _ = tiny
    model = build_model(loaded.config, loaded.state_dict)
    p = _prompts(1)[3]
    n, bs, cfg = len(p), 4, loaded.config
    nblocks = -(-n // bs)
    shape = (nblocks, bs, cfg.num_key_value_heads, cfg.head_dim)
    caches = [(torch.zeros(shape), torch.zeros(shape)) for _ in range(cfg.num_hidden_layers)]
    table = list(reversed(range(nblocks)))
    meta = AttentionMetadata(
        query_start_loc=torch.tensor([0, n], dtype=torch.int32),
        seq_lens=torch.tensor([n], dtype=torch.int32),
        slot_mapping=torch.tensor([table[t // bs] * bs + t % bs for t in range(n)]),
        block_tables=torch.tensor([table], dtype=torch.int32),
        max_query_len=n,
        max_seq_len=n,
    )

    def logits():
        with torch.inference_mode():
            hidden = model(torch.tensor(p), torch.arange(n), caches, meta, TorchRefBackend())
            return model.compute_logits(hidden)

    with torch.inference_mode():
        ref = hf(torch.tensor([p])).logits[0]
    torch.testing.assert_close(logits(), ref, atol=LOGIT_TOLERANCE, rtol=LOGIT_TOLERANCE)
    # the family's own pieces matter at this tolerance: without them the logits are far off
    for layer in model.layers:
        if layer.self_attn.sinks is not None:
            layer.self_attn.sinks = None
        elif hasattr(layer.mlp, "router"):
            layer.mlp.router.renormalize = False
    assert (logits() - ref).abs().max() > 100 * LOGIT_TOLERANCE
