"""Whoever builds an engine runs its warm-up (`build_engine`); the constructor never does, and
the warm-up runs only where it is wanted (CUDA, the model in this process, the setting on)."""

from __future__ import annotations

import pytest
from engine_fixtures import save_tiny_model

from serving.engine import EngineConfig, LLMEngine, build_engine
from serving.engine.engine import build, warmup
from serving.engine.frontend.token_deltas import TokenDeltaProcessor, token_deltas
from serving.loader import load_model_files


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny_build")
    save_tiny_model("llama", path, seed=3)
    return load_model_files(str(path))


def _config(**overrides) -> EngineConfig:
    return EngineConfig(device="cpu", block_size=4, num_kv_blocks=64, **overrides)


def test_the_constructor_runs_no_warm_up_and_build_engine_runs_it_when_wanted(tiny, monkeypatch):
    calls: list[LLMEngine] = []
    monkeypatch.setattr(build, "warm_up", calls.append)
    engine = LLMEngine(_config(), loaded=tiny)
    assert not warmup.wants_warm_up(engine)  # on the CPU
    assert calls == []
    built = build_engine(_config(), tiny)
    assert calls == [] and isinstance(built, LLMEngine)
    monkeypatch.setattr(build, "wants_warm_up", lambda engine: True)
    warmed = build_engine(_config(), tiny)
    assert calls == [warmed]


def test_wanted_needs_the_setting_cuda_and_a_local_runner(tiny):
    engine = LLMEngine(_config(warm_up_at_start=True), loaded=tiny)
    assert engine.local_runner is not None and engine.device.type == "cpu"
    assert not warmup.wants_warm_up(engine)


def test_build_engine_passes_the_output_sink(tiny):
    engine = build_engine(_config(), tiny, output=token_deltas())
    assert isinstance(engine.output, TokenDeltaProcessor)
