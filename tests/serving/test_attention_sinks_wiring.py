"""gpt-oss's attention sinks reach every attention backend: the model hands each layer's sink
logits to the backend it is given (the torch path on the CPU, the Triton one on CUDA, which no
longer refuses them), and the Triton backend passes them to both its kernels. No GPU needed:
the kernels are stood in for; their numerics are tests/serving/test_attention_sinks_cpu.py's
(interpreter) and tests/serving/gpu/test_attention_sinks.py's."""

from __future__ import annotations

import torch
from moe_fixtures import gpt_oss_config

from serving.attention.base import AttentionMetadata
from serving.attention.torch_ref import TorchRefBackend
from serving.loader.random_weights import random_loaded
from serving.model import build_model


class RecordingBackend(TorchRefBackend):
    def __init__(self) -> None:
        self.sinks: list[torch.Tensor | None] = []

    def forward(self, *args, sinks=None, **kwargs):
        self.sinks.append(sinks)
        return super().forward(*args, sinks=sinks, **kwargs)


def _step(n: int, bs: int = 4) -> AttentionMetadata:
    blocks = -(-n // bs)
    return AttentionMetadata(
        query_start_loc=torch.tensor([0, n], dtype=torch.int32),
        seq_lens=torch.tensor([n], dtype=torch.int32),
        slot_mapping=torch.arange(n),
        block_tables=torch.arange(blocks, dtype=torch.int32)[None],
        max_query_len=n,
        max_seq_len=n,
    )


def test_every_gpt_oss_layer_hands_its_sinks_to_the_backend():
    loaded = random_loaded(gpt_oss_config().to_dict(), dtype=torch.float32)
    cfg = loaded.config
    model = build_model(cfg, loaded.state_dict)
    n = 6
    shape = (2, 4, cfg.num_key_value_heads, cfg.head_dim)
    caches = [(torch.zeros(shape), torch.zeros(shape)) for _ in range(cfg.num_hidden_layers)]
    backend = RecordingBackend()
    with torch.inference_mode():
        model(torch.arange(n), torch.arange(n), caches, _step(n), backend)
    assert len(backend.sinks) == cfg.num_hidden_layers
    for layer, sinks in zip(model.layers, backend.sinks, strict=True):
        assert sinks is layer.self_attn.sinks and sinks.shape == (cfg.num_attention_heads,)


def test_the_triton_backend_passes_the_sinks_to_both_kernels(monkeypatch):
    import serving.attention.triton_backend as tb

    seen: dict[str, object] = {}

    def stand_in(name):
        def kernel(query, *args, **kwargs):
            seen[name] = kwargs.get("sinks")
            return args[5]  # out

        return kernel

    monkeypatch.setattr(tb, "paged_decode", stand_in("decode"))
    monkeypatch.setattr(tb, "paged_prefill", stand_in("prefill"))
    backend = tb.TritonAttentionBackend.__new__(tb.TritonAttentionBackend)  # no Triton needed
    backend.k_scale = backend.v_scale = 1.0
    meta = AttentionMetadata(  # one decode row, then a 3-row prefill
        query_start_loc=torch.tensor([0, 1, 4], dtype=torch.int32),
        seq_lens=torch.tensor([5, 3], dtype=torch.int32),
        slot_mapping=torch.zeros(4, dtype=torch.int64),
        block_tables=torch.zeros(2, 2, dtype=torch.int32),
        max_query_len=3,
        max_seq_len=5,
        num_decode_tokens=1,
        query_lens_cpu=[1, 3],
        seq_lens_cpu=[5, 3],
    )
    sinks = torch.randn(4)
    cache = torch.zeros(2, 4, 2, 8)
    backend.forward(torch.zeros(4, 4, 8), cache, cache, meta, 0.3, sinks=sinks)
    assert seen["decode"] is sinks and seen["prefill"] is sinks
