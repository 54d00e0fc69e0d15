"""What the loader refuses for the newer families, each refusal naming the option, and the
per-layer geometry it reads from a Gemma 4 config (as transformers writes one)."""

from __future__ import annotations

import pytest

from serving.loader import ModelLoadError
from serving.loader.config import config_from_hf

BASE = {
    "vocab_size": 64,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "sliding_window": 8,
    "layer_types": ["sliding_attention", "full_attention"],
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                           "rope_theta": 1e6},
    },
}  # fmt: skip


def _cfg(**kw):
    return {**BASE, "model_type": "gemma4_text", **kw}


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"model_type": "gemma4"}, "audio and vision towers"),
        ({"model_type": "gemma3"}, "vision tower"),
        (_cfg(enable_moe_block=True), "enable_moe_block"),
        (_cfg(use_bidirectional_attention="all"), "use_bidirectional_attention"),
        ({**_cfg(), "model_type": "gemma3_text", "attn_logit_softcapping": 50.0},
         "attn_logit_softcapping"),
        (_cfg(rope_parameters={**BASE["rope_parameters"],
                               "full_attention": {"rope_type": "yarn", "factor": 4.0}}),
         "yarn rope scaling lacks original_max_position_embeddings"),
        (_cfg(per_layer_config={"1": {"head_dim": 1024}}), "head_dim=1024"),
        (_cfg(per_layer_config={"1": {"intermediate_size": 3}}), "intermediate_size"),
        (_cfg(hidden_activation="relu"), "hidden_activation"),
        (_cfg(layer_types=["sliding_attention", "chunked_attention"]), "layer_types"),
        ({**BASE, "model_type": "qwen2", "use_sliding_window": True}, "use_sliding_window"),
    ],
)  # fmt: skip
def test_refusals_name_the_option(raw, named):
    with pytest.raises(ModelLoadError, match=named):
        config_from_hf(raw, {}, "dir")


def test_gemma4_geometry_per_layer():
    cfg = config_from_hf(
        _cfg(attention_k_eq_v=True,
             per_layer_config={"1": {"head_dim": 32, "num_key_value_heads": 1}}),
        {}, "dir",
    )  # fmt: skip
    sliding, full = cfg.layers()
    assert (sliding.head_dim, sliding.num_kv_heads, sliding.sliding_window) == (8, 2, 8)
    assert (full.head_dim, full.num_kv_heads, full.sliding_window) == (32, 1, None)
    assert full.rope.scaling_dict["rope_type"] == "proportional" and full.rope.theta == 1e6
    assert sliding.scale == full.scale == 1.0 and cfg.k_eq_v


def test_gemma4_kv_sharing_layers_read_their_producer():
    raw = _cfg(num_hidden_layers=4, layer_types=["sliding_attention", "full_attention"] * 2,
               num_kv_shared_layers=2)  # fmt: skip
    specs = config_from_hf(raw, {}, "dir").layers()
    assert [s.kv_source for s in specs] == [None, None, 0, 1]
