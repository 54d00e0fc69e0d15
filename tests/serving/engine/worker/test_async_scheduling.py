"""Async scheduling (one step of lookahead) must not change what the engine emits: the same
request mixes run through the synchronous and the async engine give identical tokens, text,
finish reasons and logprobs, with stop strings, stop token ids, EOS, max_tokens, preemption,
prefix caching, chunked prefill and n > 1; no KV block leaks, and the extra token computed for a
sequence found finished one step late is never emitted."""

from __future__ import annotations

import pytest
import torch
from engine_fixtures import (
    make_engine,
    record_launches_and_reads,
    run_to_completion,
    save_tiny_model,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from serving.engine import EngineConfig
from serving.engine.worker import runner as runner_mod
from serving.loader import load_model_files
from serving.sampling_params import SamplingParams
from vigil.config import Settings

EOS = 7  # an ordinary byte id made the end-of-sequence token, so EOS finishes really happen


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp("tiny_llama_async")
    save_tiny_model("llama", path, seed=5)
    return load_model_files(path)


def _engine(loaded, mode: str, **overrides):
    engine = make_engine(loaded, async_scheduling=mode, **overrides)
    engine.output.eos = {EOS}
    return engine


def _summary(finals) -> dict:
    return {
        rid: [
            (c.token_ids, c.text, c.finish_reason, c.stop_reason, len(c.logprobs or []))
            for c in out.outputs
        ]
        for rid, out in finals.items()
    }


def _mean_logprobs(finals) -> dict:
    return {rid: [c.mean_logprob for c in out.outputs] for rid, out in finals.items()}


def _assert_clean(engine) -> None:
    bm = engine.block_manager
    assert bm.num_free_blocks == bm.num_blocks and all(b.ref_count == 0 for b in bm.blocks)
    assert not engine.requests and not engine._pending


params_strategy = st.builds(
    dict,
    greedy=st.booleans(),
    seed=st.integers(0, 1000),
    max_tokens=st.integers(1, 14),
    n=st.sampled_from([1, 1, 2, 3]),
    top_k=st.sampled_from([-1, 5]),
    top_p=st.sampled_from([1.0, 0.8]),
    stop=st.sampled_from([[], ["a"], ["e", "xy"]]),
    stop_token_ids=st.sampled_from([[], [3], [11, 200]]),
    ignore_eos=st.booleans(),
    logprobs=st.sampled_from([None, 0, 2]),
)


def _params(d: dict) -> SamplingParams:
    return SamplingParams(
        n=d["n"],
        max_tokens=d["max_tokens"],
        temperature=0.0 if d["greedy"] else 0.9,
        seed=None if d["greedy"] else d["seed"],
        top_k=d["top_k"],
        top_p=d["top_p"],
        stop=d["stop"],
        stop_token_ids=d["stop_token_ids"],
        ignore_eos=d["ignore_eos"],
        logprobs=d["logprobs"],
    )


request_strategy = st.tuples(
    st.integers(0, 6),  # arrival step
    st.integers(0, 3),  # which shared prefix (prefix-cache hits)
    st.lists(st.integers(0, 255), min_size=1, max_size=30),
    params_strategy,
)

ENGINES = {
    "roomy": {},
    "preemption": dict(num_kv_blocks=22),
    "tiny_budget": dict(max_num_batched_tokens=7, num_kv_blocks=48),
    "chunked_off": dict(enable_chunked_prefill=False, max_num_batched_tokens=96, max_model_len=96),
    "max_num_seqs_2": dict(max_num_seqs=2),
}


@settings(
    max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    requests=st.lists(request_strategy, min_size=1, max_size=6),
    config=st.sampled_from(list(ENGINES)),
)
def test_async_engine_emits_what_the_sync_engine_emits(loaded, requests, config):
    prefixes = [[], list(range(40, 52)), list(range(90, 98)), list(range(120, 136))]
    plan: dict[int, list] = {}
    for i, (step, prefix, tail, p) in enumerate(requests):
        prompt = (prefixes[prefix] + tail)[:80]
        plan.setdefault(step, []).append((f"r{i}", prompt, _params(p)))
    runs = {}
    for mode in ("off", "on"):
        engine = _engine(loaded, mode, **ENGINES[config])
        assert engine.async_scheduling == (mode == "on")
        runs[mode] = run_to_completion(engine, plan)
        _assert_clean(engine)
    assert _summary(runs["on"]) == _summary(runs["off"])
    on, off = _mean_logprobs(runs["on"]), _mean_logprobs(runs["off"])
    for rid in off:
        assert on[rid] == pytest.approx(off[rid], abs=1e-4), rid


def test_penalties_and_prompt_logprobs_match_too(loaded):
    """Penalty rows need their real tokens on the host: the async engine reads back first."""
    prompt = list(range(60, 85))
    plan = {
        0: [
            (
                "pen",
                prompt,
                SamplingParams(
                    max_tokens=12,
                    temperature=0.8,
                    seed=3,
                    frequency_penalty=1.5,
                    presence_penalty=0.5,
                ),
            ),
            ("plp", prompt[:9], SamplingParams(max_tokens=5, temperature=0.0, prompt_logprobs=2)),
            ("g", prompt[3:], SamplingParams(max_tokens=10, temperature=0.0)),
        ]
    }
    runs = {mode: run_to_completion(_engine(loaded, mode), plan) for mode in ("off", "on")}
    assert _summary(runs["on"]) == _summary(runs["off"])
    assert runs["on"]["plp"].prompt_logprobs == runs["off"]["plp"].prompt_logprobs


def test_the_next_step_launches_before_the_previous_samples_are_read(loaded, monkeypatch):
    events = record_launches_and_reads(monkeypatch, runner_mod.ModelRunner)
    engine = _engine(loaded, "on")
    engine.add_request(
        "a", [1, 2, 3, 4, 5], SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
    )
    first = engine.step()  # the prefill is launched; nothing has been read back yet
    assert first == [] and events == ["launch"]
    outputs = [first]
    while engine.has_unfinished_requests():
        outputs.append(engine.step())
    # every call launches the next step, then reads the one before; the last call launches the
    # step of a sequence already done (its sample is dropped)
    assert events == ["launch", "launch", "read"] * 1 + ["launch", "read"] * 5
    emitted = [len(o[0].outputs[0].token_ids) for o in outputs if o]
    assert emitted == [1, 2, 3, 4, 5, 6]  # one token per call, one call late, the 7th dropped
    assert outputs[-1][0].finished and outputs[-1][0].outputs[0].finish_reason == "length"
    _assert_clean(engine)


def test_abort_drops_a_token_still_on_the_device(loaded):
    engine = _engine(loaded, "on")
    engine.add_request(
        "a", [9, 8, 7, 6], SamplingParams(max_tokens=20, temperature=0.0, ignore_eos=True)
    )
    engine.add_request(
        "b", [5, 4, 3], SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True)
    )
    for _ in range(3):
        engine.step()
    seq = engine.requests["a"].seqs[0]
    assert seq in engine._pending  # its newest token is not on the host
    emitted = len(seq.logprobs)
    final = engine.abort("a")
    assert final.finished and final.outputs[0].finish_reason == "abort"
    assert len(final.outputs[0].token_ids) == emitted == len(seq.token_ids) - seq.num_prompt_tokens
    finals = run_to_completion(engine, {})
    assert len(finals["b"].outputs[0].token_ids) == 4
    _assert_clean(engine)


def test_the_setting_defaults_to_cuda_only(monkeypatch):
    assert EngineConfig().async_scheduling == "auto"
    cfg = EngineConfig(async_scheduling="auto")
    assert cfg.resolve_async_scheduling(torch.device("cpu")) is False
    assert cfg.resolve_async_scheduling(torch.device("cuda")) is True
    assert EngineConfig(async_scheduling="on").resolve_async_scheduling(torch.device("cpu")) is True
    monkeypatch.setenv("VIGIL_ASYNC_SCHEDULING", "off")
    assert EngineConfig.from_settings(Settings()).async_scheduling == "off"
    monkeypatch.setenv("VIGIL_ASYNC_SCHEDULING", "sometimes")
    with pytest.raises(ValueError, match="async_scheduling"):
        Settings()
