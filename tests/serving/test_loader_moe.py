"""The mixture-of-experts facts of config.json: sparse layers by `mlp_only_layers` and
`decoder_sparse_step`, options refused by name, any config.json either read or refused with a
ModelLoadError (hypothesis); the expert tensors in either HF layout; random weights."""

from __future__ import annotations

import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from moe_fixtures import qwen3_moe_config

from serving.loader.config import config_from_hf
from serving.loader.errors import ModelLoadError
from serving.loader.load import LoadedModel, _check_tensors
from serving.loader.random_weights import random_loaded
from serving.model import build_model
from serving.model.moe import SparseMoeBlock


def _cfg(**overrides) -> dict:
    return {**qwen3_moe_config().to_dict(), **overrides}


def test_sparse_layers_follow_mlp_only_layers_and_decoder_sparse_step():
    def sparse(**kw):
        return config_from_hf(_cfg(num_hidden_layers=6, **kw), {}, "m").moe.sparse_layers

    assert sparse(mlp_only_layers=[]) == (0, 1, 2, 3, 4, 5)
    assert sparse(mlp_only_layers=[], decoder_sparse_step=2) == (1, 3, 5)
    assert sparse(mlp_only_layers=[3], decoder_sparse_step=3) == (2, 5)
    assert config_from_hf(_cfg(num_experts=0), {}, "m").moe is None  # every layer dense
    # a window without use_sliding_window is not applied (transformers ignores it too)
    windowed = config_from_hf(_cfg(sliding_window=64, use_sliding_window=False), {}, "m")
    assert {s.sliding_window for s in windowed.layers()} == {None}


@pytest.mark.parametrize(
    "overrides, named",
    [
        ({"use_sliding_window": True, "sliding_window": 64}, "use_sliding_window=true"),
        ({"hidden_act": "gelu"}, "hidden_act='gelu'"),
        ({"num_experts_per_tok": 9}, "num_experts_per_tok=9"),
        ({"num_experts_per_tok": 0}, "num_experts_per_tok=0"),
        ({"moe_intermediate_size": None}, "moe_intermediate_size=0"),
        ({"num_experts_per_tok": 1.5}, "num_experts_per_tok=1.5"),
        ({"decoder_sparse_step": 0}, "decoder_sparse_step=0"),
        ({"mlp_only_layers": [3]}, "mlp_only_layers=[3]"),
    ],
)
def test_unsupported_options_are_refused_by_name(overrides, named):
    with pytest.raises(ModelLoadError, match=named.replace("[", r"\[").replace("]", r"\]")):
        config_from_hf(_cfg(**overrides), {}, "m")


def test_tensor_parallelism_is_refused_for_experts():
    from serving.distributed.context import ParallelContext

    loaded = random_loaded(_cfg(), dtype=torch.float32)
    tp = ParallelContext(rank=0, world_size=2, group=None)
    with pytest.raises(ValueError, match="tensor parallelism is not supported for mixture"):
        build_model(loaded.config, loaded.state_dict, tp=tp)


@settings(max_examples=100, deadline=None)
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "num_experts": st.one_of(st.none(), st.integers(-2, 12)),
            "num_experts_per_tok": st.one_of(st.none(), st.integers(-1, 14)),
            "decoder_sparse_step": st.one_of(st.none(), st.integers(-1, 5)),
            "mlp_only_layers": st.one_of(
                st.none(), st.text(max_size=3), st.lists(st.integers(-2, 5), max_size=4)
            ),
            "moe_intermediate_size": st.integers(1, 64),
            "norm_topk_prob": st.booleans(),
            "hidden_act": st.sampled_from(["silu", "gelu", "relu"]),
            "sliding_window": st.one_of(st.none(), st.integers(1, 9)),
        },
    )
)
def test_any_moe_config_is_read_or_refused_with_a_message(overrides):
    cfg = _cfg()
    cfg.pop("moe_intermediate_size")
    cfg.update(overrides)
    try:
        config = config_from_hf(cfg, {}, "m")
    except ModelLoadError as exc:
        assert str(exc).startswith("m: ")
        return
    moe = config.moe
    if moe is not None:
        assert 1 <= moe.top_k <= moe.num_experts
        assert all(0 <= i < config.num_hidden_layers for i in moe.sparse_layers)


def test_both_expert_layouts_load_the_same_model(tmp_path):
    from moe_fixtures import save_tiny_moe

    hf = save_tiny_moe(tmp_path, qwen3_moe_config(), seed=2)
    from serving.loader import load_model_files

    on_disk = load_model_files(tmp_path)  # one tensor per expert
    in_memory = {k: v for k, v in hf.state_dict().items()}  # stacked
    _check_tensors(on_disk.config, in_memory, "hf", on_disk.config.vocab_size)
    a = build_model(on_disk.config, on_disk.state_dict)
    b = build_model(on_disk.config, in_memory)
    for name, tensor in a.state_dict().items():
        assert torch.equal(tensor, b.state_dict()[name]), name
    assert isinstance(a.layers[0].mlp, SparseMoeBlock)


def test_a_missing_expert_is_named():
    loaded = random_loaded(_cfg(), dtype=torch.float32)
    state = dict(loaded.state_dict)
    del state["model.layers.2.mlp.experts.down_proj"]
    with pytest.raises(ModelLoadError, match="model.layers.2.mlp.experts.down_proj"):
        _check_tensors(loaded.config, state, "m", loaded.config.vocab_size)


def test_random_weights_build_a_model_of_the_config():
    loaded = random_loaded(_cfg(), dtype=torch.float32)
    assert isinstance(loaded, LoadedModel)
    model = build_model(loaded.config, loaded.state_dict)
    block = model.layers[2].mlp
    assert tuple(block.w13.shape) == (8, 64, 64) and tuple(block.w2.shape) == (8, 64, 32)
    assert tuple(block.router.weight.shape) == (8, 64)


def _gpt_oss(**overrides) -> dict:
    from moe_fixtures import gpt_oss_config

    return {**gpt_oss_config().to_dict(), **overrides}


@pytest.mark.parametrize(
    "overrides, named",
    [
        ({"quantization_config": {"quant_method": "mxfp4"}}, "quant_method='mxfp4'"),
        ({"rope_parameters": {"rope_type": "llama3", "rope_theta": 1e4}}, "rope_type='llama3'"),
        (
            {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "mscale": 1.0}},
            "options ['mscale']",
        ),
        ({"sliding_window": None}, "sliding_window >= 1"),
        ({"layer_types": ["full_attention"]}, "layer_types must list 4"),
        ({"num_experts_per_tok": 9}, "num_experts_per_tok=9"),
    ],
)
def test_gpt_oss_options_are_refused_by_name(overrides, named):
    with pytest.raises(ModelLoadError, match=re.escape(named)):
        config_from_hf(_gpt_oss(**overrides), {}, "m")


def test_gpt_oss_without_attention_bias_loads_without_biases():
    loaded = random_loaded(_gpt_oss(attention_bias=False), dtype=torch.float32)
    assert not any(name.endswith("proj.bias") for name in loaded.state_dict if "attn" in name)
    model = build_model(loaded.config, loaded.state_dict)
    assert model.layers[0].self_attn.o_proj.bias is None


@pytest.mark.parametrize("truncate", [True, False])
@pytest.mark.parametrize("attention_factor", [None, 1.3])
@pytest.mark.parametrize("factor, theta", [(32.0, 150000.0), (4.0, 10000.0)])
def test_yarn_matches_transformers(truncate, attention_factor, factor, theta):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from serving.loader.rope import attention_factor_for, inv_freq_for

    scaling = {
        "rope_type": "yarn",
        "rope_theta": theta,
        "factor": factor,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "original_max_position_embeddings": 4096,
        "truncate": truncate,
    }
    if attention_factor is not None:
        scaling["attention_factor"] = attention_factor
    from moe_fixtures import gpt_oss_config

    hf_config = gpt_oss_config(head_dim=64, rope_parameters=dict(scaling))
    ref_inv_freq, ref_factor = ROPE_INIT_FUNCTIONS["yarn"](hf_config, "cpu")
    ours = {k: v for k, v in scaling.items() if k != "rope_theta"}
    torch.testing.assert_close(inv_freq_for(theta, 64, ours), ref_inv_freq, rtol=0, atol=0)
    assert attention_factor_for(ours) == pytest.approx(ref_factor, rel=1e-12)
