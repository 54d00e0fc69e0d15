"""The mixture-of-experts facts of config.json: sparse layers by `mlp_only_layers` and
`decoder_sparse_step`, options refused by name, any config.json either read or refused with a
ModelLoadError (hypothesis); the expert tensors in either HF layout; random weights."""

from __future__ import annotations

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


@pytest.mark.parametrize(
    "overrides, named",
    [
        ({"sliding_window": 64}, "sliding_window"),
        ({"use_sliding_window": True}, "use_sliding_window"),
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


@settings(max_examples=150, deadline=None)
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
