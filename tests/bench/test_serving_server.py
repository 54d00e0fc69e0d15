"""bench_serving's random model directory: a shape whose vocabulary is larger than the
tokenizer's gets zero output rows past the tokenizer, so greedy decoding (the benchmark's)
only produces tokens that have text; the directory is reused when it already holds the shape."""

from __future__ import annotations

import json

import torch
from engine_fixtures import byte_tokenizer_json
from safetensors.torch import load_file

from bench.common.tiny_model import tiny_qwen3
from bench.targets.serving_server import prompt_vocab, tokenizer_vocab, write_random_model
from serving.engine import EngineConfig, LLMEngine
from serving.sampling_params import SamplingParams

# a Qwen3-like shape, its vocabulary 600 against a 256-token tokenizer
TINY_QWEN3 = tiny_qwen3(600, 512, bos_token_id=1, eos_token_id=2)


def test_greedy_tokens_stay_inside_the_tokenizer_and_the_directory_is_reused(tmp_path):
    tok_dir = tmp_path / "tok"
    tok_dir.mkdir()
    byte_tokenizer_json(tok_dir)
    (tok_dir / "tokenizer.json").rename(tok_dir / "smollm2_tokenizer.json")  # the GPU runs' name
    assert tokenizer_vocab(tok_dir) == 256
    out = tmp_path / "model"
    write_random_model(out, tok_dir, "qwen3-4b", "cpu", shape=TINY_QWEN3)
    assert json.loads((out / "vigil_bench_shape.json").read_text())["tokenizer_vocab"] == 256

    weights = load_file(str(out / "model.safetensors"))
    head = weights.get("lm_head.weight", weights["model.embed_tokens.weight"])
    assert head.shape[0] == 600 and not head[256:].any() and head[:256].abs().sum() > 0

    engine = LLMEngine(
        EngineConfig(
            model_path=str(out),
            device="cpu",
            dtype="float32",
            block_size=4,
            num_kv_blocks=128,
            max_num_batched_tokens=64,
            max_num_seqs=8,
        )
    )
    params = SamplingParams(max_tokens=40, temperature=0.0, ignore_eos=True)
    gen = torch.Generator().manual_seed(0)
    for i in range(6):
        engine.add_request(f"r{i}", torch.randint(0, 256, (8,), generator=gen).tolist(), params)
    produced = []
    while engine.has_unfinished_requests():
        produced += [
            t for out_ in engine.step() if out_.finished for t in out_.outputs[0].token_ids
        ]
    assert len(produced) == 240 and max(produced) < 256  # 57 % of ids would be past it otherwise

    stamp = (out / "model.safetensors").stat().st_mtime_ns
    write_random_model(out, tok_dir, "qwen3-4b", "cpu", shape=TINY_QWEN3)
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp  # reused, not rewritten
    assert prompt_vocab(str(out), "qwen3-4b") == 256 and prompt_vocab(None, None) == 49152


def test_prompt_vocab_of_a_model_directory_given_without_a_shape(tmp_path):
    byte_tokenizer_json(tmp_path)  # writes tmp_path/tokenizer.json
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 600}))
    assert prompt_vocab(str(tmp_path), None) == 256  # the tokenizer's 256 ids, not the model's 600
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 100}))
    assert prompt_vocab(str(tmp_path), None) == 100


def test_a_server_that_dies_at_start_up_is_reported_with_the_end_of_its_log(tmp_path):
    """A run on a remote machine keeps only its output: the error must carry the server's words."""
    import argparse
    import socket

    import pytest

    from bench.targets.serving_server import Storage, start_server

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    missing = tmp_path / "no-such-model"
    args = argparse.Namespace(
        device="cpu",
        kv_cache_mb=64,
        model=str(missing),
        torch_threads=1,
        port=port,
        log_prefix=str(tmp_path / "serve"),
    )
    with pytest.raises(RuntimeError, match="exited with 1") as failed:
        start_server(args, "separate", 2, 0.0, Storage(tmp_path / "storage"))
    assert str(missing) in str(failed.value)  # the server's own line naming what it could not load
