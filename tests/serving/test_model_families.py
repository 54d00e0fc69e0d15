"""Mistral (sliding window), Gemma 3 (sliding + full layers, final soft-cap, (1 + w) norms, local
and global rope) and Gemma 4 (full layers with another head_dim and one KV head, k = v, partial
rotary, per-layer input embeddings) as transformers writes them: our logits equal HF's and greedy
decoding through the engine equals HF `generate` token for token, prompts longer than the window.

Tolerance: float32 everywhere; logits agree to 1e-4 absolute (HF and we sum in different orders:
fused q/k/v and gate/up matmuls, paged gathers), far inside the margins greedy argmax needs.
"""

from __future__ import annotations

import pytest
import torch
from engine_fixtures import TINY_WINDOW, greedy, make_engine, run_to_completion, save_tiny_model

from serving.attention.base import AttentionMetadata
from serving.attention.layer_spec import kv_groups, layer_slots
from serving.attention.torch_ref import TorchRefBackend
from serving.loader import load_model_files
from serving.model import build_model

FAMILIES = ["mistral", "gemma3_text", "gemma4_text"]
PROMPT_LENS = (5, 13, 23, 37)  # all but the first longer than the window (8)
LOGIT_ATOL = 1e-4


@pytest.fixture(scope="module", params=FAMILIES)
def tiny(request, tmp_path_factory):
    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp(request.param)
    hf = save_tiny_model(request.param, path, seed=5)
    return hf, load_model_files(path)


def _prompts(seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 256, (n,), generator=g).tolist() for n in PROMPT_LENS]


def test_geometry_read_from_the_checkpoint(tiny):
    _, loaded = tiny
    specs = loaded.config.layers()
    windows = {s.sliding_window for s in specs}
    assert TINY_WINDOW in windows
    if loaded.config.arch == "gemma4_text":
        full = [s for s in specs if s.sliding_window is None]
        assert {(s.head_dim, s.num_kv_heads) for s in full} == {(32, 1)}
        assert len(kv_groups(specs)) == 2


def test_prefill_logits_match_hf(tiny):
    hf, loaded = tiny
    cfg = loaded.config
    model = build_model(cfg, loaded.state_dict)
    p = _prompts(1)[3]
    n, bs = len(p), 4
    nblocks = -(-n // bs)
    specs = cfg.layers()
    groups = kv_groups(specs)
    caches = [
        torch.zeros(len(g.layers), 2, nblocks, bs, g.num_kv_heads, g.head_dim) for g in groups
    ]
    kv = [(caches[g][j, 0], caches[g][j, 1]) for g, j in layer_slots(specs, groups)]
    table = list(reversed(range(nblocks)))  # the cache is really addressed through the table
    slots = torch.tensor([table[t // bs] * bs + t % bs for t in range(n)])
    tables = torch.tensor([table], dtype=torch.int32)
    meta = AttentionMetadata(
        query_start_loc=torch.tensor([0, n], dtype=torch.int32),
        seq_lens=torch.tensor([n], dtype=torch.int32),
        slot_mapping=slots,
        block_tables=tables,
        max_query_len=n,
        max_seq_len=n,
        group_tables=[(tables, slots)] * (len(groups) - 1),
    )
    with torch.inference_mode():
        ours = model.compute_logits(
            model(torch.tensor(p), torch.arange(n), kv, meta, TorchRefBackend())
        )
        ref = hf(torch.tensor([p])).logits[0]
    torch.testing.assert_close(ours, ref, atol=LOGIT_ATOL, rtol=0)


def test_greedy_matches_hf_generate(tiny):
    hf, loaded = tiny
    prompts = _prompts()
    # chunked prefill (budget 12 < longest prompt), blocks of 4: sliding blocks are freed while
    # prompts and decodes run past the window
    engine = make_engine(loaded, max_num_batched_tokens=12)
    finals = run_to_completion(
        engine, {0: [(str(i), p, greedy(20)) for i, p in enumerate(prompts)]}
    )
    for i, p in enumerate(prompts):
        ids = torch.tensor([p])
        ref = hf.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=20, do_sample=False
        )
        assert finals[str(i)].outputs[0].token_ids == ref[0, len(p) :].tolist(), f"prompt {i}"
