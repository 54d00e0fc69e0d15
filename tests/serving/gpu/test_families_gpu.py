"""The dense families of per-layer geometry through the engine on CUDA (Triton kernels) against
transformers' own `generate` (CPU, float32) on the same tiny random checkpoint, token for token:
Mistral (one sliding group: the fused forward and CUDA graphs with a window), Gemma 3 (sliding
and full layers, soft-capped final logits) and Gemma 4 with KV-sharing layers. Prompts longer
than the window (8), chunked prefill, blocks of 4 (sliding blocks freed as decoding runs on).
Gemma 4 without sharing: tests/serving/gpu/test_attention_geometry.py; Qwen3-MoE:
test_moe_gemm.py; gpt-oss: test_attention_sinks.py."""

from __future__ import annotations

import pytest
import torch
from engine_fixtures import greedy, make_engine, run_to_completion, save_tiny_model

from serving.loader import load_model_files

pytestmark = pytest.mark.gpu
PROMPT_LENS = (5, 13, 23, 37)
NEW_TOKENS = 20
SHARING = {"num_kv_shared_layers": 2, "use_double_wide_mlp": True}
FAMILIES = {"mistral": {}, "gemma3_text": {}, "gemma4_text": SHARING}


@pytest.mark.parametrize("arch", list(FAMILIES))
def test_greedy_on_cuda_equals_transformers(arch, tmp_path):
    hf = save_tiny_model(arch, tmp_path, seed=5, **FAMILIES[arch])
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, 256, (n,), generator=g).tolist() for n in PROMPT_LENS]
    engine = make_engine(
        load_model_files(tmp_path), device="cuda", dtype="float32", max_num_batched_tokens=12
    )
    assert engine.runner.backend.name == "triton"
    finals = run_to_completion(
        engine, {0: [(str(i), p, greedy(NEW_TOKENS)) for i, p in enumerate(prompts)]}
    )
    for i, p in enumerate(prompts):
        ids = torch.tensor([p])
        with torch.inference_mode():
            ref = hf.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS, do_sample=False
            )
        assert finals[str(i)].outputs[0].token_ids == ref[0, len(p) :].tolist(), f"prompt {i}"
