"""Engine defaults live in one place (the settings); every engine setting reaches the engine,
and the chunked-prefill and CUDA-graph switches are honoured."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch
from engine_fixtures import greedy, save_tiny_model

from serving.engine import EngineConfig, LLMEngine
from serving.engine.core.scheduler import SchedulerConfig
from serving.engine.engine import runner_setup
from serving.engine.worker.runner import ModelRunner
from serving.loader import load_model_files
from vigil.config import Settings, load_settings

SHARED = [f.name for f in dataclasses.fields(EngineConfig) if f.name in Settings.model_fields]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp("tiny_defaults")
    save_tiny_model("llama", path, seed=11)
    return load_model_files(path)


def test_the_settings_are_the_only_source_of_defaults():
    for name in SHARED:
        assert getattr(EngineConfig(), name) == Settings.model_fields[name].default, name
    assert all(f.default is dataclasses.MISSING for f in dataclasses.fields(SchedulerConfig))
    graphs = inspect.signature(ModelRunner).parameters["enable_cuda_graphs"]
    assert graphs.default is inspect.Parameter.empty


def test_every_engine_setting_reaches_the_engine_config(monkeypatch):
    changed = {
        "model_path": "/models/x.gguf", "device": "cpu", "dtype": "float16", "block_size": 32,
        "kv_cache_memory_mb": 64, "max_num_seqs": 3, "max_num_batched_tokens": 512,
        "max_model_len": 256, "enable_prefix_caching": False, "kv_cache_dtype": "fp8",
        "enable_chunked_prefill": False, "torch_threads": 2, "enable_cuda_graphs": False,
        "async_scheduling": "on", "tensor_parallel_size": 2, "capture_graphs_at_start": False,
        "warm_up_at_start": False, "tp_allreduce": "nccl", "programmatic_launch": "off",
    }  # fmt: skip
    assert sorted(changed) == sorted(SHARED)  # a new engine setting needs a value here
    for name, value in changed.items():
        assert value != Settings.model_fields[name].default, name
        monkeypatch.setenv(f"VIGIL_{name.upper()}", str(value).lower())
    config = EngineConfig.from_settings(load_settings())
    assert {name: getattr(config, name) for name in SHARED} == changed


def _schedules(engine: LLMEngine) -> list[list[int]]:
    """Per step, the tokens run for each scheduled sequence."""
    plans = []
    schedule = engine.scheduler.schedule

    def recording():
        out = schedule()
        plans.append([item.num_new_tokens for item in out.scheduled])
        return out

    engine.scheduler.schedule = recording
    return plans


@pytest.mark.parametrize("chunked", [False, True])
def test_chunked_prefill_switch_is_honoured(tiny, chunked):
    settings = load_settings(device="cpu", max_num_batched_tokens=64, max_model_len=64,
                             enable_chunked_prefill=chunked)  # fmt: skip
    config = dataclasses.replace(EngineConfig.from_settings(settings), num_kv_blocks=64)
    engine = LLMEngine(config, loaded=tiny)
    plans = _schedules(engine)
    prompts = {"a": list(range(1, 41)), "b": list(range(101, 141))}
    for request_id, prompt in prompts.items():
        engine.add_request(request_id, prompt, greedy(4))
    outputs = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                outputs[out.request_id] = out.outputs[0].token_ids
    if chunked:  # b's prompt is split: 24 tokens now, 16 next step beside a's decode
        assert plans[:2] == [[40, 24], [1, 16]]
    else:  # b's 40 tokens do not fit the 24 left: it waits, then runs whole
        assert plans[:2] == [[40], [1, 40]]
    # the same greedy tokens either way (the invariance tests cover this more widely)
    reference = LLMEngine(dataclasses.replace(config, enable_chunked_prefill=True), loaded=tiny)
    for request_id, prompt in prompts.items():
        reference.add_request(request_id, prompt, greedy(4))
    expected = {}
    while reference.has_unfinished_requests():
        for out in reference.step():
            if out.finished:
                expected[out.request_id] = out.outputs[0].token_ids
    assert outputs == expected and len(outputs["a"]) == 4


def test_chunked_prefill_off_needs_a_budget_for_a_whole_prompt(tiny):
    config = EngineConfig(device="cpu", num_kv_blocks=64, max_num_batched_tokens=32,
                          max_model_len=64, enable_chunked_prefill=False)  # fmt: skip
    with pytest.raises(ValueError, match="with chunked prefill off, max_num_batched_tokens"):
        LLMEngine(config, loaded=tiny)


@pytest.mark.parametrize("graphs", [False, True])
def test_cuda_graphs_switch_reaches_the_runner(tiny, monkeypatch, graphs):
    seen = []

    class Recording(ModelRunner):
        def __init__(self, *args, **kwargs):
            seen.append(args[6])  # enable_cuda_graphs
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(runner_setup, "ModelRunner", Recording)
    settings = load_settings(device="cpu", enable_cuda_graphs=graphs)
    LLMEngine(dataclasses.replace(EngineConfig.from_settings(settings), num_kv_blocks=16),
              loaded=tiny)  # fmt: skip
    assert seen == [graphs]


def test_the_engine_sets_the_kernel_launch_mode(tiny):
    from serving.kernels import pdl

    try:
        LLMEngine(
            EngineConfig(device="cpu", num_kv_blocks=16, programmatic_launch="off"), loaded=tiny
        )
        assert pdl.MODE == "off"
        LLMEngine(EngineConfig(device="cpu", num_kv_blocks=16), loaded=tiny)
        assert pdl.MODE == "auto"
    finally:
        pdl.set_mode("auto")
