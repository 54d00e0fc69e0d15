"""Small random models of the real architectures and step metadata for the GPU forward tests."""

from __future__ import annotations

import torch

from serving.attention.base import AttentionMetadata
from serving.loader.config import ModelConfig
from serving.model.llama import LlamaForCausalLM
from serving.model.rope import RotaryEmbedding


def small_config(arch: str) -> ModelConfig:
    qwen = arch == "qwen3"
    return ModelConfig(
        arch=arch,
        vocab_size=1000,
        hidden_size=512 if qwen else 576,
        intermediate_size=1536,
        num_hidden_layers=3,
        num_attention_heads=8 if qwen else 9,
        num_key_value_heads=4 if qwen else 3,
        head_dim=128 if qwen else 64,
        rms_norm_eps=1e-6,
        rope_theta=1e6 if qwen else 1e5,
        rope_scaling=None,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        attention_bias=False,
        qk_norm=qwen,
        bos_token_id=None,
    )


def random_model(arch: str, seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = small_config(arch)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg)
    for name, p in model.named_parameters():
        if "norm" in name:
            p.data = 1 + 0.1 * torch.randn_like(p)
        else:
            p.data.normal_(0, 0.05)
    model = model.bfloat16().eval()
    model.rotary = RotaryEmbedding(cfg).cuda()  # float32 inv_freq, as build_model leaves it
    return model


def step_meta(ctx: list[int], qlens: list[int], tables: torch.Tensor, bs: int):
    slots, pos, qsl = [], [], [0]
    for i, (c, q) in enumerate(zip(ctx, qlens, strict=True)):
        for p in range(c, c + q):
            slots.append(int(tables[i, p // bs]) * bs + p % bs)
            pos.append(p)
        qsl.append(qsl[-1] + q)
    seq_lens = [c + q for c, q in zip(ctx, qlens, strict=True)]
    nd = 0
    while nd < len(qlens) and qlens[nd] == 1:
        nd += 1
    meta = AttentionMetadata(
        query_start_loc=torch.tensor(qsl, dtype=torch.int32, device="cuda"),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device="cuda"),
        slot_mapping=torch.tensor(slots, dtype=torch.int64, device="cuda"),
        block_tables=tables.cuda(),
        max_query_len=max(qlens),
        max_seq_len=max(seq_lens),
        num_decode_tokens=nd,
        query_lens_cpu=list(qlens),
        seq_lens_cpu=seq_lens,
    )
    return torch.tensor(pos, device="cuda"), meta


def new_caches(cfg, num_blocks, bs, dtype=torch.bfloat16):
    shape = (num_blocks, bs, cfg.num_key_value_heads, cfg.head_dim)
    return [
        (
            torch.zeros(shape, dtype=dtype, device="cuda"),
            torch.zeros(shape, dtype=dtype, device="cuda"),
        )
        for _ in range(cfg.num_hidden_layers)
    ]
