"""The roofline's weight bytes of the mixture-of-experts shapes equal the weights the engine
loads for them (random_weights' tensor list and shapes), once a batch reads every expert; and
the gpt-oss-20b-like shape loads as the per-layer geometry it names."""

from __future__ import annotations

import math

import pytest

from bench.common.roofline import decode_step_bytes, weight_bytes
from serving.loader.config import config_from_hf
from serving.loader.load import expected_tensor_names
from serving.loader.random_weights import _full_shape
from vigil.devtools.model_shapes import GPT_OSS_20B_LIKE, QWEN3_30B_A3B


def _loaded_elements(shape: dict) -> int:
    config = config_from_hf(dict(shape), {}, "shape")
    names = expected_tensor_names(config, config.moe is not None)
    return sum(math.prod(_full_shape(n, config)) for n in names)


@pytest.mark.parametrize("shape", [QWEN3_30B_A3B, GPT_OSS_20B_LIKE])
def test_weight_bytes_count_what_the_engine_loads(shape):
    every_expert = weight_bytes(shape, elem=2, batch=100_000)
    # biases, sinks and the q/k norms' rows: well under a thousandth of the weights
    assert every_expert == pytest.approx(2 * _loaded_elements(shape), rel=1e-3)


def test_gpt_oss_20b_like_geometry_and_roofline():
    config = config_from_hf(dict(GPT_OSS_20B_LIKE), {}, "shape")
    specs = config.layers()
    assert [s.sliding_window for s in specs[:2]] == [128, None] and len(specs) == 24
    assert config.attention_sinks and config.moe.num_experts == 32 and config.moe.top_k == 4
    assert 40e9 < weight_bytes(GPT_OSS_20B_LIKE, batch=100_000) < 44e9  # ~21 B parameters
    # one token reads 4 of 32 experts a layer: ~3.6 B active parameters, plus the input
    # embedding table, counted whole as for every untied shape (0.58 B)
    assert 8e9 < weight_bytes(GPT_OSS_20B_LIKE, batch=1) < 9e9
    # sliding layers read at most their window of KV: a long context costs the full layers
    short = decode_step_bytes(GPT_OSS_20B_LIKE, 1, 128) - weight_bytes(GPT_OSS_20B_LIKE)
    long = decode_step_bytes(GPT_OSS_20B_LIKE, 1, 1128) - weight_bytes(GPT_OSS_20B_LIKE)
    per_token_full = 12 * 2 * 2 * 8 * 64  # 12 full layers, K and V, bf16, 8 heads of 64
    assert long - short == pytest.approx(1000 * per_token_full)
