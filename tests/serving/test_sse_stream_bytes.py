"""The streams' SSE bytes are those of the per-event encoder they replaced (kept here as the
reference: a dict per event through json.dumps, one item per event), for the same engine outputs:
texts with any characters, several choices, several prompts, logprobs, usage, errors mid-stream.
Items now carry one engine output's events each and the last one ends with [DONE]."""

from __future__ import annotations

import asyncio
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from serving.outputs import CompletionOutput, RequestMetrics, RequestOutput, TokenLogprob
from serving.server.api import chat, completions
from serving.server.api.generation import merge
from serving.server.base.errors import APIError, in_band
from serving.server.base.sse import DONE, HOLE, EventTemplate, event


async def _old_completion_chunks(streams, request_id, created, model, n, logprobs, include_usage):
    """serving/server/api/completions.py `_chunks` before event templates (reference)."""
    base = {"id": request_id, "object": "text_completion", "created": created, "model": model}
    usage_field = {"usage": None} if include_usage else {}
    sent_text, sent_lp, done, finals = {}, {}, set(), {}
    try:
        async for k, out in merge(streams):
            finals[k] = out
            for c in sorted(out.outputs, key=lambda c: c.index):
                index = k * n + c.index
                if index in done:
                    continue
                start, lp_start = sent_text.get(index, 0), sent_lp.get(index, 0)
                text, new_lps = c.text[start:], (c.logprobs or [])[lp_start:]
                if not (text or new_lps or c.finished):
                    continue
                sent_text[index], sent_lp[index] = start + len(text), lp_start + len(new_lps)
                if c.finished:
                    done.add(index)
                choice = completions._choice(index, c, text, new_lps, start, logprobs)
                yield event({**base, "choices": [choice], **usage_field})
        if include_usage:
            yield event({**base, "choices": [], "usage": completions._usage(list(finals.values()))})
    except Exception as exc:
        yield event(in_band(exc))
    yield DONE


async def _old_chat_chunks(stream, request_id, created, model, logprobs, include_usage):
    """serving/server/api/chat.py `_chunks` before event templates (reference)."""
    base = {"id": request_id, "object": "chat.completion.chunk", "created": created, "model": model}
    usage_field = {"usage": None} if include_usage else {}
    sent_text, sent_lp, done, last = {}, {}, set(), None

    def chunk(index, delta, lps, finish):
        lp = {"content": chat._logprob_entries(lps)} if logprobs and lps is not None else None
        return event(
            {
                **base,
                "choices": [
                    {"index": index, "delta": delta, "logprobs": lp, "finish_reason": finish}
                ],
                **usage_field,
            }
        )

    try:
        async for out in stream:
            last = out
            for c in sorted(out.outputs, key=lambda c: c.index):
                if c.index in done:
                    continue
                if c.index not in sent_text:
                    sent_text[c.index], sent_lp[c.index] = 0, 0
                    yield chunk(c.index, {"role": "assistant", "content": ""}, None, None)
                text = c.text[sent_text[c.index] :]
                new_lps = (c.logprobs or [])[sent_lp[c.index] :]
                if text or new_lps or c.finished:
                    sent_text[c.index] += len(text)
                    sent_lp[c.index] += len(new_lps)
                    delta = {"content": text} if text else {}
                    yield chunk(c.index, delta, new_lps, c.finish_reason)
                    if c.finished:
                        done.add(c.index)
        if include_usage and last is not None:
            yield event({**base, "choices": [], "usage": chat._usage([last])})
    except Exception as exc:
        yield event(in_band(exc))
    yield DONE


# one step of one request: per choice, the text it adds and whether it finishes ("stop"/"length")
pieces = st.text(st.characters(blacklist_categories=["Cs"]), max_size=6)
step = st.lists(
    st.tuples(pieces, st.sampled_from([None, None, "stop", "length"])), min_size=1, max_size=3
)
script = st.lists(step, min_size=1, max_size=6)


def outputs(script_steps, request_id: str, with_logprobs: bool) -> list[RequestOutput]:
    """Cumulative RequestOutputs for `script_steps` (n = the first step's width; a finished
    choice stays finished with its text)."""
    n = len(script_steps[0])
    texts, finish, lps = [""] * n, [None] * n, [[] for _ in range(n)]
    metrics = RequestMetrics(arrival_time=time.monotonic())
    result = []
    for s in script_steps:
        for i, (piece, reason) in enumerate((s + [("", None)] * n)[:n]):
            if finish[i] is None:
                texts[i] += piece
                finish[i] = reason
                if with_logprobs and piece:
                    lps[i].append(
                        TokenLogprob(7, piece, -0.5, [(7, piece, -0.5), (8, "x", float("-inf"))])
                    )
        choices = [
            CompletionOutput(
                i,
                texts[i],
                "",
                list(range(len(texts[i]))),
                list(lps[i]) if with_logprobs else None,
                finish[i],
            )
            for i in range(n)
        ]
        result.append(
            RequestOutput(
                request_id, "p", [1, 2], choices, all(f is not None for f in finish), metrics
            )
        )
        if result[-1].finished:
            break
    return result


async def replay(items: list[RequestOutput], fail: bool):
    for out in items:
        yield out
        await asyncio.sleep(0)
    if fail:
        raise APIError("the engine core died", status=500, code="engine_dead")


async def collect(gen) -> list[str]:
    return [item async for item in gen]


def normalized(scripts) -> list:
    """Every prompt of a completions request has the same n."""
    n = len(scripts[0][0])
    return [[(s + [("", None)] * n)[:n] for s in sc] for sc in scripts]


@settings(max_examples=80, deadline=None)
@given(
    scripts=st.lists(script, min_size=1, max_size=3),
    logprobs=st.sampled_from([None, 0, 2]),
    usage=st.booleans(),
    fail=st.booleans(),
    model=st.sampled_from(["m", 'q"\\é', HOLE]),
)
def test_completion_stream_bytes_match_the_per_event_encoder(scripts, logprobs, usage, fail, model):
    scripts = normalized(scripts)
    n = len(scripts[0][0])
    runs = [outputs(sc, f"cmpl-x-{k}", logprobs is not None) for k, sc in enumerate(scripts)]

    def streams():
        return [replay(r, fail and k == len(runs) - 1) for k, r in enumerate(runs)]

    args = ("cmpl-x", 1700000000, model, n, logprobs, usage)
    new = asyncio.run(collect(completions._chunks(streams(), *args)))
    old = asyncio.run(collect(_old_completion_chunks(streams(), *args)))
    assert "".join(new) == "".join(old)
    assert new[-1].endswith(DONE) and all(DONE not in item for item in new[:-1])
    assert all(item for item in new)  # no empty writes


@settings(max_examples=80, deadline=None)
@given(steps=script, logprobs=st.booleans(), usage=st.booleans(), fail=st.booleans())
def test_chat_stream_bytes_match_the_per_event_encoder(steps, logprobs, usage, fail):
    run = outputs(normalized([steps])[0], "chatcmpl-x", logprobs)
    args = ("chatcmpl-x", 1700000000, "m", logprobs, usage)
    new = asyncio.run(collect(chat._chunks(replay(run, fail), *args)))
    old = asyncio.run(collect(_old_chat_chunks(replay(run, fail), *args)))
    assert "".join(new) == "".join(old)
    assert new[-1].endswith(DONE) and all(DONE not in item for item in new[:-1])


def test_one_item_per_engine_output_and_the_last_output_goes_with_done():
    run = outputs(
        [[("a", None), ("b", None)], [("c", None), ("d", "stop")], [("e", "length")]], "r", False
    )
    items = asyncio.run(
        collect(completions._chunks([replay(run, False)], "r", 1, "m", 2, None, True))
    )
    assert len(items) == len(
        run
    )  # 3 outputs: 2 items of events, then the last output + usage + [DONE]
    assert [item.count("data: ") for item in items] == [2, 2, 3]
    assert items[-1].index('"text":"e"') < items[-1].index('"usage":{') < items[-1].index(DONE)


def test_an_error_mid_stream_follows_the_events_already_produced():
    run = outputs([[("a", None)], [("b", None)]], "r", False)
    items = asyncio.run(collect(chat._chunks(replay(run, True), "r", 1, "m", False, False)))
    body = "".join(items)
    assert body.index('"content":"b"') < body.index('"code":"engine_dead"') < body.index(DONE)
    assert items[-1].startswith('data: {"error"')


@given(text=st.text(), index=st.integers(0, 2**31), finish=st.sampled_from([None, "stop"]))
def test_a_template_fills_in_exactly_what_json_dumps_writes(text, index, finish):
    def build(t: str) -> dict:
        return {
            "id": "x",
            "choices": [{"index": index, "delta": {"content": t}, "finish_reason": finish}],
        }

    template = EventTemplate(build)
    assert template.exact
    assert template.fill(text) == event(build(text))


def test_a_payload_holding_the_hole_elsewhere_is_built_in_full():
    template = EventTemplate(lambda t: {"model": HOLE, "text": t})
    assert not template.exact
    assert template.fill("t\n") == event({"model": HOLE, "text": "t\n"})
