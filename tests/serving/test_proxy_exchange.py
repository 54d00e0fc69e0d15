"""The proxy's reading of relayed bytes (serving/proxy/exchange.py), which comes from an upstream
Vigil does not control: a well-formed stream gives the same text, usage and finish reason however
it was split into reads (hypothesis over split points), and arbitrary bytes or JSON shapes never
raise (hypothesis), so one odd upstream answer cannot kill the logger's thread."""

from __future__ import annotations

import json

from fake_upstream import WORDS, chat_events
from hypothesis import given, settings
from hypothesis import strategies as st

from serving.proxy.exchange import Exchange
from vigil.config import load_settings

SETTINGS = load_settings(api_keys=["k" * 20])
SCOPE = {
    "type": "http",
    "method": "POST",
    "path": "/v1/chat/completions",
    "headers": [],
    "client": ("127.0.0.1", 1),
    "state": {},
}
REQUEST = json.dumps(
    {
        "model": "m",
        "messages": [{"role": "user", "content": "Where is the cat?"}],
        "user": "someone@example.com",
    }
).encode()


def exchange(pieces: list[bytes], streamed: bool = True, body: bytes = REQUEST) -> Exchange:
    ex = Exchange(dict(SCOPE), body, started=100.0, streamed=streamed)
    ex.pieces = pieces
    ex.times = [100.0 + 0.01 * (i + 1) for i in range(len(pieces))]
    ex.end_time = 1_800_000_000.0
    return ex


@settings(max_examples=200, deadline=None)
@given(
    cuts=st.lists(st.integers(0, 5000), max_size=30), logprobs=st.booleans(), usage=st.booleans()
)
def test_the_same_stream_reads_the_same_however_it_was_split(cuts, logprobs, usage):
    raw = b"".join(chat_events("m", WORDS, logprobs, usage))
    points = sorted({c % (len(raw) + 1) for c in cuts} | {0, len(raw)})
    pieces = [raw[a:b] for a, b in zip(points, points[1:], strict=False) if b > a]
    seen = exchange(pieces).observe(SETTINGS)
    assert seen is not None and seen.segment.user != "someone@example.com"  # a pseudonym
    [(stats, extra)], model = seen.read()
    assert stats.response == "".join(WORDS) and stats.finish_reason == "stop" and model == "m"
    assert stats.completion_tokens == len(WORDS) and stats.prompt == "Where is the cat?"
    assert stats.prompt_tokens == (12 if usage else None)
    assert stats.mean_logprob == (-0.5 if logprobs else None)
    assert stats.ttft_ms is not None and stats.ttft_ms > 0 and extra["request_id"] == "chatcmpl-up"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "choices",
                    "delta",
                    "content",
                    "text",
                    "index",
                    "usage",
                    "logprobs",
                    "finish_reason",
                    "tool_calls",
                    "function",
                    "name",
                    "model",
                    "id",
                    "message",
                    "token_logprobs",
                    "completion_tokens",
                    "prompt_tokens",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(
    events=st.lists(json_values, max_size=6),
    noise=st.binary(max_size=60),
    streamed=st.booleans(),
    body=st.one_of(
        st.just(REQUEST), st.binary(max_size=40), json_values.map(lambda v: json.dumps(v).encode())
    ),
)
def test_odd_upstream_bytes_never_raise(events, noise, streamed, body):
    payload = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + noise
    seen = exchange(
        [payload[: len(payload) // 2], payload[len(payload) // 2 :]], streamed, body
    ).observe(SETTINGS)
    if seen is not None:
        choices, _model = seen.read()
        for stats, _extra in choices:
            assert isinstance(stats.response, str)


def test_shapes_that_once_could_raise_are_read_or_skipped():
    odd = [
        {"choices": [{"index": "a", "text": "x"}]},
        {"choices": 5},
        {"choices": [{"delta": {"tool_calls": 3}}]},
        {"choices": [{"delta": {"tool_calls": [{"function": "f"}]}}]},
        {"choices": [{"text": "y", "logprobs": {"token_logprobs": 7}}]},
        {"usage": {"completion_tokens": True}},
    ]
    payload = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in odd)
    [(stats, _)], _ = exchange([payload]).observe(SETTINGS).read()
    assert stats.response == "xy" and stats.completion_tokens == 2 and stats.mean_logprob is None
