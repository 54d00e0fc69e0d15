"""Tiny random-weight Llama / Qwen2 (qkv bias) / Qwen3 (q/k norm) saved as safetensors with
transformers, loaded by our loader, served by our engine: greedy tokens identical to HF generate,
and our model's logits equal HF's."""

from __future__ import annotations

import pytest
import torch
from engine_fixtures import greedy, make_engine, run_to_completion, save_tiny_model

from serving.attention.base import AttentionMetadata
from serving.attention.torch_ref import TorchRefBackend
from serving.loader import load_model_files
from serving.model import build_model

PROMPT_LENS = (3, 9, 17, 30, 47)


@pytest.fixture(scope="module", params=["llama", "qwen2", "qwen3"])
def tiny(request, tmp_path_factory):
    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp(request.param)
    hf = save_tiny_model(request.param, path, seed=11)
    return hf, load_model_files(path)


def _prompts(seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 256, (n,), generator=g).tolist() for n in PROMPT_LENS]


def test_greedy_matches_hf_generate(tiny):
    hf, loaded = tiny
    prompts = _prompts()
    # chunked prefill (budget 20 < longest prompt) and blocks of 4: the paged paths all run
    engine = make_engine(loaded, max_num_batched_tokens=20)
    finals = run_to_completion(
        engine, {0: [(str(i), p, greedy(24)) for i, p in enumerate(prompts)]}
    )
    for i, p in enumerate(prompts):
        ids = torch.tensor([p])
        ref = hf.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=24, do_sample=False
        )
        assert finals[str(i)].outputs[0].token_ids == ref[0, len(p) :].tolist(), f"prompt {i}"


def test_prefill_logits_match_hf(tiny):
    hf, loaded = tiny
    model = build_model(loaded.config, loaded.state_dict)
    p = _prompts(1)[3]
    n, bs, cfg = len(p), 4, loaded.config
    nblocks = -(-n // bs)
    caches = [
        (
            torch.zeros(nblocks, bs, cfg.num_key_value_heads, cfg.head_dim),
            torch.zeros(nblocks, bs, cfg.num_key_value_heads, cfg.head_dim),
        )
        for _ in range(cfg.num_hidden_layers)
    ]
    # blocks in reverse order: the cache is really addressed through the block table
    table = list(reversed(range(nblocks)))
    meta = AttentionMetadata(
        query_start_loc=torch.tensor([0, n], dtype=torch.int32),
        seq_lens=torch.tensor([n], dtype=torch.int32),
        slot_mapping=torch.tensor([table[t // bs] * bs + t % bs for t in range(n)]),
        block_tables=torch.tensor([table], dtype=torch.int32),
        max_query_len=n,
        max_seq_len=n,
    )
    with torch.inference_mode():
        hidden = model(torch.tensor(p), torch.arange(n), caches, meta, TorchRefBackend())
        ours = model.compute_logits(hidden)
        ref = hf(torch.tensor([p])).logits[0]
    torch.testing.assert_close(ours, ref, atol=1e-4, rtol=1e-4)
