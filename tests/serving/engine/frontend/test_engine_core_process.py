"""The engine core in its own process (EngineCoreClient) against the in-process engine on the
same tiny model: the same outputs for greedy, seeded sampling, stop strings, stop token ids,
logprobs and prompt logprobs; a bad request is refused alike on both paths; killing the core
fails in-flight requests at once (no hang) and the supervisor brings a new core up."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import msgspec
import pytest
from core_fixtures import collect, tiny_config, tiny_model_dir
from engine_fixtures import greedy
from hypothesis import given, settings
from hypothesis import strategies as st

from serving.engine import AsyncLLMEngine, LLMEngine
from serving.engine.frontend.core_client import EngineCoreClient, EngineDeadError
from serving.engine.frontend.messages import AddRequest, Codec, RequestDelta, SeqDelta, StepOutputs
from serving.outputs import EngineStats
from serving.sampling_params import SamplingParams

PROMPT = [5, 17, 99, 3, 42, 7]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_model_dir(tmp_path_factory.mktemp("core"))


@pytest.fixture(scope="module")
def client(model_dir):
    engine = EngineCoreClient(tiny_config(model_dir))
    engine.start()
    yield engine
    asyncio.run(engine.shutdown())


def _final(engine, requests: dict[str, tuple[list[int], SamplingParams]]):
    async def run():
        outs = await asyncio.gather(
            *[collect(engine, rid, ids, p) for rid, (ids, p) in requests.items()]
        )
        return {rid: o[-1] for rid, o in zip(requests, outs, strict=True)}

    return asyncio.run(run())


def _reference(model_dir, requests):
    engine = AsyncLLMEngine(LLMEngine(tiny_config(model_dir)))
    engine.start()
    try:
        return _final(engine, requests)
    finally:
        asyncio.run(engine.shutdown())


def test_outputs_match_the_in_process_engine(model_dir, client):
    probe = _reference(model_dir, {"probe": (PROMPT, greedy(24))})["probe"].outputs[0]
    stop = probe.text[6:9]  # a stop string the greedy text is known to contain
    stop_tok = probe.token_ids[5]
    requests = {
        "greedy": (PROMPT, greedy(24)),
        "stop-string": (PROMPT, greedy(24, stop=[stop])),
        "stop-token": (PROMPT, greedy(24, stop_token_ids=[stop_tok])),
        "logprobs": (PROMPT[:4], greedy(10, logprobs=3)),
        "prompt-logprobs": (PROMPT, greedy(4, prompt_logprobs=2)),
        "sampled-n2": (
            PROMPT[:3],
            SamplingParams(n=2, max_tokens=12, temperature=0.9, seed=7, ignore_eos=True),
        ),
    }
    want = _reference(model_dir, requests)
    got = _final(client, requests)
    assert want["stop-string"].outputs[0].finish_reason == "stop"  # the cases really cover it
    assert want["stop-string"].outputs[0].stop_reason == stop
    assert want["stop-token"].outputs[0].stop_reason == stop_tok
    for rid in requests:
        w, g = want[rid], got[rid]
        assert g.finished and len(g.outputs) == len(w.outputs), rid
        for wc, gc in zip(w.outputs, g.outputs, strict=True):
            assert (gc.index, gc.text, list(gc.token_ids), gc.finish_reason, gc.stop_reason) == (
                wc.index,
                wc.text,
                list(wc.token_ids),
                wc.finish_reason,
                wc.stop_reason,
            ), rid
            assert gc.mean_logprob == pytest.approx(wc.mean_logprob, abs=1e-4), rid
            assert gc.mean_entropy == pytest.approx(wc.mean_entropy, abs=1e-4), rid
            if wc.logprobs is not None:
                assert [(t.token_id, t.token, [a[:2] for a in t.top]) for t in gc.logprobs] == [
                    (t.token_id, t.token, [a[:2] for a in t.top]) for t in wc.logprobs
                ]
                assert [t.logprob for t in gc.logprobs] == pytest.approx(
                    [t.logprob for t in wc.logprobs], abs=1e-4
                )
        if w.prompt_logprobs is not None:
            assert g.prompt_logprobs[0] is None and len(g.prompt_logprobs) == len(w.prompt_logprobs)
            assert [(t.token_id, [a[0] for a in t.top]) for t in g.prompt_logprobs[1:]] == [
                (t.token_id, [a[0] for a in t.top]) for t in w.prompt_logprobs[1:]
            ]
    assert client.stats().num_running == 0


def test_stop_string_aborts_the_request_in_the_core(model_dir, client):
    probe = _final(client, {"p": (PROMPT, greedy(40))})["p"].outputs[0]
    out = _final(client, {"s": (PROMPT, greedy(400, stop=[probe.text[2:4]]))})["s"]
    assert out.outputs[0].finish_reason == "stop" and len(out.outputs[0].token_ids) < 10
    deadline = time.monotonic() + 5
    while client.stats().num_running and time.monotonic() < deadline:  # the core heard the abort
        time.sleep(0.01)
    stats = client.stats()
    assert stats.num_running == 0 and stats.kv_cache_usage == 0.0
    assert stats.generation_tokens_total < 400 + 40 + 200  # it did not run on to 400 tokens


def test_the_core_froze_its_start_up_heap_before_it_was_ready(client):
    # the model, tokenizer and engine: far more objects than the engine's own few
    assert client.core_frozen_objects > 10_000


def test_bad_request_is_refused_before_it_reaches_the_core(client):
    with pytest.raises(ValueError, match="outside the vocabulary"):
        client.validate_request("x", [10**6], greedy(2))
    with pytest.raises(ValueError, match="context length"):
        client.validate_request("x", [1] * client.max_model_len, greedy(2))


@pytest.fixture(scope="module")
def in_process(model_dir):
    return LLMEngine(tiny_config(model_dir))


def _refusal(check, *args) -> str | None:
    try:
        check(*args)
    except ValueError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


_token = st.integers(-3, 260)  # the tiny vocabulary is 256 ids
_prompts = st.one_of(
    st.lists(_token, max_size=8),
    st.builds(lambda n, t: [t] * n, st.integers(1020, 1026), _token),  # around the 1024 context
)
_params = st.builds(
    SamplingParams,
    n=st.integers(-1, 130),
    max_tokens=st.integers(-1, 4),
    temperature=st.floats(-0.5, 2.5),
    top_p=st.floats(-0.1, 1.1),
    top_k=st.integers(-2, 3),
    logprobs=st.none() | st.integers(-1, 22),
    prompt_logprobs=st.none() | st.integers(-1, 22),
    stop=st.lists(st.sampled_from(["", "a", "xyz"]), max_size=17),
)


@settings(max_examples=300, deadline=None)
@given(prompt=_prompts, params=_params)
def test_both_engine_paths_refuse_the_same_requests_with_the_same_message(
    in_process, client, prompt, params
):
    """The separate path's API-side check and the in-process engine's are one function: the same
    verdict and message for any request (the core's own limits sent in its ready message)."""
    assert (client.vocab_size, client.max_model_len) == (256, in_process.max_model_len)
    ours = _refusal(client.validate_request, "r", prompt, params)
    assert ours == _refusal(in_process.validate_request, "r", prompt, params)


def test_a_bad_request_fails_generate_alike_in_both_modes(model_dir, client):
    async def first_error(engine) -> str:
        with pytest.raises(ValueError) as info:
            await collect(engine, "bad", [1, 2, 10**6], greedy(2))
        return str(info.value)

    inproc = AsyncLLMEngine(LLMEngine(tiny_config(model_dir)))
    inproc.start()
    try:
        want = asyncio.run(first_error(inproc))
    finally:
        asyncio.run(inproc.shutdown())
    assert (
        asyncio.run(first_error(client))
        == want
        == "prompt token id 1000000 is outside the vocabulary [0, 256)"
    )


def test_messages_round_trip_through_msgpack():
    codec = Codec()
    add = AddRequest("r", [1, 2], SamplingParams(n=2, stop=["x"], seed=3, logprobs=2), 12.5)
    assert codec.to_core.decode(codec.encoder.encode(add)) == add
    step = StepOutputs(
        deltas=[
            RequestDelta(
                "r",
                [SeqDelta(0, [4], [-0.5], [1.0], top=[[(4, -0.5)]], finish_reason="length")],
                True,
                first_token_time=1.0,
            )
        ],
        stats=EngineStats(num_running=1, kv_cache_usage=0.25),
        adds_seen=3,
    )
    back = codec.from_core.decode(codec.encoder.encode(step))
    assert back == step and back.stats.kv_cache_usage == 0.25
    with pytest.raises(msgspec.ValidationError):  # a wrong shape is refused, never half-read
        codec.to_core.decode(msgspec.msgpack.encode(["add", "r", "not-a-list"]))


def test_killing_the_core_fails_in_flight_requests_and_a_new_core_takes_over(model_dir):
    engine = EngineCoreClient(tiny_config(model_dir))
    engine.start()
    events: list[bool] = []
    engine.add_health_listener(events.append)
    old_pid = engine.core_pid
    try:

        async def doomed():
            got = []
            async for out in engine.generate("long", PROMPT, greedy(900)):
                got.append(out)
                if len(got) == 3:
                    os.kill(old_pid, signal.SIGKILL)
            return got

        async def run():
            started = time.monotonic()
            with pytest.raises(EngineDeadError):
                await asyncio.wait_for(doomed(), 30)
            return time.monotonic() - started

        assert asyncio.run(run()) < 10  # failed at once, not after a timeout
        deadline = time.monotonic() + 120
        while events != [False, True] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (
            events == [False, True]
            and engine.supervisor.restarts == 1
            and engine.core_pid != old_pid
        )
        assert engine.is_running
        out = asyncio.run(collect(engine, "after", PROMPT, greedy(8)))[-1]
        assert out.finished and len(out.outputs[0].token_ids) == 8
    finally:
        asyncio.run(engine.shutdown())
    assert not engine.is_running


# starts real OS processes: left out by make test-fast
pytestmark = pytest.mark.processes
