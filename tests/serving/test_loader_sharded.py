"""A checkpoint transformers writes in several safetensors files (an index beside them), and in
bf16 / fp16, loads to the very tensors of the one-file float32 checkpoint (rounded to the stored
dtype): a gpt-oss tiny model (experts, sinks, biases)."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from engine_fixtures import byte_tokenizer_json
from moe_fixtures import gpt_oss_config, save_tiny_moe

from serving.loader import load_model_files


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    whole = tmp_path_factory.mktemp("whole")
    hf = save_tiny_moe(whole, gpt_oss_config(), seed=5)
    return hf, load_model_files(whole).state_dict


def test_a_sharded_checkpoint_loads_the_same_tensors(saved, tmp_path):
    hf, whole = saved
    hf.save_pretrained(str(tmp_path), max_shard_size="100KB")
    byte_tokenizer_json(tmp_path)
    files = sorted(tmp_path.glob("*.safetensors"))
    assert len(files) > 2 and (tmp_path / "model.safetensors.index.json").is_file()
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert {f.name for f in files} == set(index["weight_map"].values())
    sharded = load_model_files(tmp_path).state_dict
    assert sharded.keys() == whole.keys()
    for name, tensor in whole.items():
        assert torch.equal(sharded[name], tensor), name


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_checkpoints_load_their_stored_values(saved, tmp_path, dtype):
    hf, whole = saved
    copy.deepcopy(hf).to(dtype).save_pretrained(str(tmp_path))  # the fixture's stays float32
    byte_tokenizer_json(tmp_path)
    half = load_model_files(tmp_path).state_dict
    assert half.keys() == whole.keys()
    for name, tensor in whole.items():
        assert torch.equal(half[name], tensor.to(dtype).to(half[name].dtype)), name
