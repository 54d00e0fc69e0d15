"""Fuzzing what the proxy parses from its upstream, a party Vigil does not control, under time
and memory limits (hypothesis): the HTTP answer (serving/proxy/upstream.py) ends in a response
or an `UpstreamError` (a clean 502/504), never another exception, and its headers are bounded;
the relayed JSON/SSE (serving/proxy/exchange.py) reads without raising, in time linear in its
size however finely it was split, in memory bounded by a small multiple of it, and an answer
past `MAX_KEPT_BYTES` is relayed whole but not kept."""

from __future__ import annotations

import asyncio
import json
import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from serving.proxy.exchange import MAX_KEPT_BYTES, Exchange
from serving.proxy.upstream import MAX_HEAD_BYTES, UpstreamError, UpstreamPool
from vigil.config import load_settings

SETTINGS = load_settings(api_keys=["k" * 20])
SCOPE = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": []}
SCOPE |= {"client": ("127.0.0.1", 1), "state": {}}
REQUEST = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()


def _exchange(pieces: list[bytes], streamed: bool = True) -> Exchange:
    ex = Exchange(dict(SCOPE), REQUEST, started=100.0, streamed=streamed)
    for i, piece in enumerate(pieces):
        ex.keep(piece, 100.0 + 0.001 * (i + 1))
    ex.end_time = 1_800_000_000.0
    return ex


def _read(ex: Exchange):
    seen = ex.observe(SETTINGS)
    return None if seen is None else seen.read()


def _chunk(text: str) -> bytes:
    return json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}).encode()


hostile_data = st.one_of(
    st.integers(1, 200_000).map(lambda n: b"[" * n),  # nested past the parser's stack
    st.integers(1, 50_000).map(lambda n: b'{"choices":' * n),
    st.sampled_from([b"NaN", b"-Infinity", b"1e999999", b'"\\ud800"', b"[DONE]", b"null"]),
    st.integers(0, 1 << 20).map(lambda n: _chunk("x" * n)),  # one huge text event
    st.binary(max_size=200),  # not UTF-8, not JSON
    st.dictionaries(st.sampled_from(["choices", "usage", "model", "id"]), st.integers()).map(
        lambda d: json.dumps(d).encode()
    ),
)
field = st.one_of(
    hostile_data.map(lambda d: b"data: " + d),
    st.sampled_from([b"event: x", b"id: 7", b"retry: 1", b": comment", b"data:", b"data"]),
)
newline = st.sampled_from([b"\n", b"\r\n", b"\r", b"\n\n", b"\r\n\r\n"])
hostile_stream = st.lists(st.tuples(field, newline).map(b"".join), max_size=12).map(b"".join)


def _split(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(raw) + 1) for c in cuts} | {0, len(raw)})
    return [raw[a:b] for a, b in zip(points, points[1:], strict=False) if b > a]


@settings(
    max_examples=120,
    deadline=3000,  # ms per example: a read that went quadratic or hung fails here
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    raw=hostile_stream, cuts=st.lists(st.integers(0, 1 << 22), max_size=40), streamed=st.booleans()
)
def test_hostile_sse_reads_cleanly_in_bounded_time_and_memory(raw, cuts, streamed):
    tracemalloc.start()
    try:
        read = _read(_exchange(_split(raw, cuts), streamed))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= 8 * len(raw) + (4 << 20), f"{peak} bytes for a {len(raw)}-byte answer"
    if read is not None:
        for stats, _extra in read[0]:
            assert isinstance(stats.response, str) and stats.completion_tokens >= 0


def test_a_finely_split_stream_is_read_in_linear_time():
    """Was: every piece re-joined and re-split the unread rest, so an answer arriving a byte
    per read took time quadratic in its size (a 120 KB event: seconds)."""
    raw = b"data: " + _chunk("y" * 120_000) + b"\n\ndata: [DONE]\n\n"
    start = time.perf_counter()
    [(stats, _)], _ = _read(_exchange([raw[i : i + 1] for i in range(len(raw))]))
    took = time.perf_counter() - start
    assert stats.response == "y" * 120_000 and stats.completion_tokens == 1
    assert took < 1.0, f"{took:.2f} s for {len(raw)} one-byte pieces"


def test_an_answer_past_the_cap_is_relayed_but_not_kept():
    """Was: every relayed piece was kept until the answer ended, so an endless answer grew the
    proxy's memory without bound."""
    piece = b"data: " + _chunk("z" * 60_000) + b"\n\n"
    ex = _exchange([])
    for i in range(MAX_KEPT_BYTES // len(piece) + 2):
        ex.keep(piece, float(i))
    assert ex.overflow and ex.pieces == [] and ex.times == [] and ex.observe(SETTINGS) is None
    within = _exchange([piece] * 3)
    assert not within.overflow and _read(within)[0][0][0].response == "z" * 180_000


async def _answer_with(payload: bytes, hold: bool = False):
    """An upstream that answers every request with `payload` (then closes, unless `hold`); the
    pool's outcome: (status, body) or the UpstreamError."""

    async def handle(reader, writer):
        await reader.read(65536)
        for i in range(0, len(payload), 65536):
            writer.write(payload[i : i + 65536])
            await writer.drain()
        if hold:
            await asyncio.sleep(5)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = UpstreamPool(f"http://127.0.0.1:{port}", timeout_s=2.0)
    try:
        response = await pool.request(b"POST", b"/v1/chat/completions", [], b"{}")
        return response.status, await response.read()
    except UpstreamError as exc:
        return exc
    finally:
        pool.close()
        server.close()


status_line = st.sampled_from(
    [b"HTTP/1.1 200 OK", b"HTTP/1.1 500 X", b"HTTP/1.0 204 N", b"HTTP/9 x"]
)
header = st.sampled_from(
    [
        b"content-type: text/event-stream",
        b"transfer-encoding: chunked",
        b"content-length: 5",
        b"content-length: -1",
        b"content-length: 99999999999999999999",
        b"connection: close",
        b"x: \x00\xff",
        b"bad header",
    ]
)
http_answer = st.one_of(
    st.binary(max_size=300),
    st.tuples(
        status_line, st.lists(header, max_size=4), st.binary(max_size=300), hostile_stream
    ).map(lambda t: t[0] + b"\r\n" + b"".join(h + b"\r\n" for h in t[1]) + b"\r\n" + t[2] + t[3]),
)


@settings(max_examples=60, deadline=5000, suppress_health_check=[HealthCheck.too_slow])
@given(payload=http_answer)
def test_arbitrary_upstream_bytes_end_in_a_response_or_an_upstream_error(payload):
    outcome = asyncio.run(_answer_with(payload))
    if not isinstance(outcome, UpstreamError):
        status, body = outcome
        assert 100 <= status <= 999 and isinstance(body, bytes)


def test_endless_headers_are_refused_at_the_cap():
    """Was: every header line was kept until the upstream stopped sending them."""
    endless = b"HTTP/1.1 200 OK\r\n" + b"x-pad: " + b"a" * 1000 + b"\r\n" * 1
    payload = endless + (b"x-pad: " + b"a" * 1000 + b"\r\n") * 4000  # 4 MB of headers
    start = time.perf_counter()
    outcome = asyncio.run(_answer_with(payload, hold=True))
    assert isinstance(outcome, UpstreamError), outcome
    assert f"past {MAX_HEAD_BYTES} bytes" in str(outcome)
    assert time.perf_counter() - start < 2.0  # refused as it ran past, not at the timeout


@pytest.mark.parametrize("separator", [b"\n\n", b"\r\n\r\n", b"\n\r\n"])
def test_each_blank_line_form_ends_an_event(separator):
    raw = b"data: " + _chunk("a") + separator + b"data: " + _chunk("b") + separator
    [(stats, _)], _ = _read(_exchange(_split(raw, [7, 40, 77])))
    assert stats.response == "ab" and stats.completion_tokens == 2
