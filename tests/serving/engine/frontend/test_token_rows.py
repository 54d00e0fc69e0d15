"""One-token rows (`TokenRows`): the engine core sends a running request's plain one-token advance
as a row of columns instead of a RequestDelta. What the API side builds from rows and deltas must
be what it builds from deltas alone, and what the in-process engine answers."""

from __future__ import annotations

import pytest
from core_fixtures import tiny_config, tiny_model_dir
from engine_fixtures import greedy
from hypothesis import given, settings
from hypothesis import strategies as st
from test_output_coalescing import _AsciiTokenizer

from serving.engine import LLMEngine
from serving.engine.frontend.core_process import route_rows
from serving.engine.frontend.messages import Codec, RequestDelta, SeqDelta, StepOutputs, TokenRows
from serving.engine.frontend.output_slot import OutputSlot
from serving.engine.frontend.request_text import FrontRequest
from serving.engine.frontend.step_fold import LiveRequest, fold_step
from serving.engine.frontend.token_deltas import token_deltas
from serving.outputs import EngineStats
from serving.sampling_params import SamplingParams

LOOP = object()  # fold_step only groups by the loop; no event loop runs here


def _step(deltas=(), rows=None) -> StepOutputs:
    return StepOutputs(deltas=list(deltas), stats=EngineStats(), adds_seen=0, rows=rows)


def _choices(out) -> list[tuple]:
    return [
        (c.text, list(c.token_ids), c.finish_reason, c.stop_reason, c.mean_logprob, c.mean_entropy)
        for c in out.outputs
    ]


@settings(max_examples=200, derandomize=True, deadline=None)
@given(
    tokens=st.lists(st.integers(97, 100), min_size=2, max_size=30),
    as_row=st.lists(st.booleans(), min_size=30, max_size=30),
    stops=st.lists(st.text(alphabet="abcd", min_size=1, max_size=3), max_size=2),
    logprobs=st.lists(st.floats(-20, 0), min_size=30, max_size=30),
)
def test_rows_fold_like_one_token_deltas(tokens, as_row, stops, logprobs):
    """Token i after the first goes as a row when as_row[i] (the last always as the finishing
    delta, as the core sends it); the oracle gets every token as its own delta."""
    params = SamplingParams(max_tokens=len(tokens), stop=stops)
    live = LiveRequest(
        FrontRequest("r", None, [1], params, _AsciiTokenizer(), 0.0), OutputSlot(), LOOP
    )
    oracle = FrontRequest("r", None, [1], params, _AsciiTokenizer(), 0.0)
    requests, want, got, aborts = {"r": live}, None, None, []
    for i, tok in enumerate(tokens):
        last = i == len(tokens) - 1
        lp, h, at = logprobs[i], -logprobs[i] / 2, float(i)
        delta = RequestDelta(
            "r",
            [SeqDelta(0, [tok], [lp], [h], finish_reason="length" if last else None)],
            last,
            first_token_time=0.0,
            last_token_time=at,
        )
        want = oracle.apply(delta)
        live.slot.behind = False  # the reader keeps up: every step builds an output
        if i and not last and as_row[i]:
            per_loop, stop_aborts = fold_step(
                requests, _step(rows=TokenRows(["r"], [tok], [lp], [h], [at]))
            )
        else:
            per_loop, stop_aborts = fold_step(requests, _step([delta]))
        aborts += stop_aborts
        ((_, got),) = per_loop[LOOP]  # the reader keeps up: one output a step
        assert (
            _choices(got) == _choices(want)
            and got.metrics.last_token_time == want.metrics.last_token_time
        )
        if want.finished:
            break
    assert got.finished and "r" not in requests
    # a stop string found on the API side before the core's last token ends the request there:
    # the core is told to abort it (one found in the last token needs no abort: the core is done)
    ended_here = want.outputs[0].finish_reason == "stop" and not last
    assert aborts == (["r"] if ended_here else [])


def test_rows_of_unknown_requests_are_skipped_and_order_is_kept():
    params = SamplingParams(max_tokens=10)
    requests = {
        rid: LiveRequest(
            FrontRequest(rid, None, [1], params, _AsciiTokenizer(), 0.0), OutputSlot(), LOOP
        )
        for rid in ("a", "b")
    }
    rows = TokenRows(
        ["a", "gone", "b"], [97, 98, 99], [-1.0, -2.0, -3.0], [0.1, 0.2, 0.3], [1.0, 1.0, 1.0]
    )
    per_loop, aborts = fold_step(requests, _step(rows=rows))
    assert [out.outputs[0].text for _, out in per_loop[LOOP]] == ["a", "c"] and aborts == []


def test_route_rows_sends_each_row_to_the_api_process_that_added_it():
    rows = TokenRows(
        ["a", "b", "c", "d"],
        [1, 2, 3, 4],
        [-1.0, -2.0, -3.0, -4.0],
        [0.0, 0.1, 0.2, 0.3],
        [5.0, 6.0, 7.0, 8.0],
    )
    routed = route_rows({"a": 1, "c": 1, "d": 2}, rows, 4)
    assert routed[0] == TokenRows(["b"], [2], [-2.0], [0.1], [6.0])
    assert routed[1] == TokenRows(["a", "c"], [1, 3], [-1.0, -3.0], [0.0, 0.2], [5.0, 7.0])
    assert routed[2] == TokenRows(["d"], [4], [-4.0], [0.3], [8.0]) and routed[3] is None
    assert route_rows({}, None, 2) == [None, None]


def test_step_outputs_with_rows_round_trip():
    codec = Codec()
    step = StepOutputs(
        deltas=[],
        stats=EngineStats(num_running=2),
        adds_seen=1,
        rows=TokenRows(["a", "b"], [7, 8], [-0.5, -0.25], [1.0, 2.0], [3.0, 3.0]),
    )
    assert codec.from_core.decode(codec.encoder.encode(step)) == step
    bare = StepOutputs(deltas=[], stats=EngineStats(), adds_seen=0)
    assert codec.from_core.decode(codec.encoder.encode(bare)).rows is None


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_model_dir(tmp_path_factory.mktemp("rows"))


REQUESTS = [  # (id, prompt, params): plain ones go in rows; n > 1, top logprobs never do
    ("plain", [3, 4, 5], greedy(24)),
    ("stop", [9, 8, 7, 6], greedy(30, stop=["e"])),
    ("sampled", [5, 5], SamplingParams(max_tokens=20, temperature=0.9, seed=7, ignore_eos=True)),
    (
        "forked",
        [11, 12],
        SamplingParams(max_tokens=12, n=2, temperature=0.8, seed=3, ignore_eos=True),
    ),
    ("tops", [13, 14, 15], greedy(10, logprobs=2)),
]


@pytest.mark.parametrize("async_scheduling", [False, True])
@pytest.mark.parametrize("num_kv_blocks", [256, 14])  # 14: too few for all at once, so preemptions
def test_core_rows_and_deltas_rebuild_what_the_in_process_engine_answers(
    model_dir, async_scheduling, num_kv_blocks
):
    def engine(core: bool) -> LLMEngine:
        cfg = tiny_config(model_dir, num_kv_blocks=num_kv_blocks)
        e = LLMEngine(cfg, output=token_deltas()) if core else LLMEngine(cfg)
        e.set_async_scheduling(async_scheduling)
        for rid, ids, params in REQUESTS:
            e.add_request(rid, ids, params)
        return e

    inproc, core = engine(False), engine(True)
    want = {}
    while inproc.has_unfinished_requests():
        want.update({out.request_id: out for out in inproc.step() if out.finished})
    requests = {
        rid: LiveRequest(
            FrontRequest(rid, None, ids, params, core.tokenizer, 0.0), OutputSlot(), LOOP
        )
        for rid, ids, params in REQUESTS
    }
    got, row_ids, preempted = {}, set(), 0
    while core.has_unfinished_requests():
        deltas = core.step()
        rows = core.output.take_rows()
        row_ids.update(rows.request_ids if rows is not None else [])
        preempted = max(preempted, core.stats().num_preemptions_total)
        msg = Codec().from_core.decode(Codec().encoder.encode(_step(deltas, rows)))  # over the wire
        for live in requests.values():
            live.slot.behind = False
        per_loop, aborts = fold_step(requests, msg)
        got.update({out.request_id: out for _, out in per_loop.get(LOOP, []) if out.finished})
        for rid in aborts:
            core.abort(rid)
    assert set(got) == set(want)
    for rid in want:
        assert _choices(got[rid]) == _choices(want[rid]), rid
    assert {"plain", "sampled"} <= row_ids and not row_ids & {"forked", "tops"}
    assert (preempted > 0) == (num_kv_blocks == 14)
