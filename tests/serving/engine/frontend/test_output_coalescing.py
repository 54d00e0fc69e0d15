"""Output coalescing: a reader that falls behind holds one output, not a queue, and still gets
every piece of text exactly once; and the API-side text assembly (FrontRequest) against a
brute-force oracle for any chunking of the core's token deltas."""

from __future__ import annotations

import asyncio

import pytest
from core_fixtures import collect, tiny_config, tiny_model_dir
from engine_fixtures import greedy
from hypothesis import given, settings
from hypothesis import strategies as st

from serving.engine.frontend.core_client import EngineCoreClient
from serving.engine.frontend.messages import RequestDelta, SeqDelta
from serving.engine.frontend.output_slot import OutputSlot
from serving.engine.frontend.request_text import FrontRequest
from serving.outputs import CompletionOutput, RequestMetrics, RequestOutput
from serving.sampling_params import SamplingParams


def _output(text: str, delta: str, finished: bool = False) -> RequestOutput:
    choice = CompletionOutput(
        index=0,
        text=text,
        delta=delta,
        token_ids=[0] * len(text),
        finish_reason="length" if finished else None,
    )
    return RequestOutput("r", None, [1], [choice], finished, RequestMetrics(arrival_time=0.0))


@settings(max_examples=150, derandomize=True, deadline=None)
@given(
    pieces=st.lists(st.text(max_size=4), min_size=1, max_size=40),
    reads=st.lists(st.booleans(), min_size=40, max_size=40),
)
def test_slot_hands_over_every_piece_once_whatever_the_reader_pace(pieces, reads):
    """`reads[i]`: whether the reader takes what is waiting after put i."""

    async def run():
        slot, text, got, outputs = OutputSlot(), "", [], 0
        for i, piece in enumerate(pieces):
            text += piece
            slot.put(_output(text, piece, finished=i == len(pieces) - 1))
            if reads[i] or i == len(pieces) - 1:
                out = await slot.get()
                got.append(out.outputs[0].delta)
                outputs += 1
                assert out.outputs[0].text == text  # the newest, never a stale one
        return got, outputs, text

    got, outputs, text = asyncio.run(run())
    assert "".join(got) == text and outputs <= len(pieces)


def test_a_stalled_reader_holds_one_output():
    async def run():
        slot, text = OutputSlot(), ""
        for i in range(5000):
            text += "0123456789"
            slot.put(_output(text, "0123456789", finished=i == 4999))
        out = await slot.get()
        return slot, out, text

    slot, out, text = asyncio.run(run())
    assert slot.merged == 4999 and out.finished and out.outputs[0].delta == text


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    engine = EngineCoreClient(tiny_config(tiny_model_dir(tmp_path_factory.mktemp("coalesce"))))
    engine.start()
    yield engine
    asyncio.run(engine.shutdown())


def test_slow_reader_gets_coalesced_deltas_and_the_fast_one_every_step(client):
    async def run():
        return await asyncio.gather(
            collect(client, "slow", [3, 4, 5], greedy(120), reader_delay_s=0.15),
            collect(client, "fast", [3, 4, 5], greedy(120)),
        )

    slow, fast = asyncio.run(run())
    for outs in (slow, fast):
        final = outs[-1].outputs[0]
        assert final.finished and len(final.token_ids) == 120
        assert "".join(o.outputs[0].delta for o in outs) == final.text  # nothing lost or repeated
    assert slow[-1].outputs[0].text == fast[-1].outputs[0].text
    assert len(slow) < len(fast) / 2, (len(slow), len(fast))  # it was handed merged outputs


class _AsciiTokenizer:
    """Byte-level vocabulary of printable ASCII: id = character code."""

    vocab_size = 128
    is_byte_level = True

    def is_special(self, token_id: int) -> bool:
        return False

    def id_to_bytes(self, token_id: int) -> bytes:
        return bytes([token_id])


def _oracle(tokens: list[int], stops: list[str]) -> tuple[str, str | None]:
    """Brute force: the first prefix of the text that contains a stop string ends it there."""
    text = "".join(chr(t) for t in tokens)
    for end in range(1, len(text) + 1):
        hits = [s for s in stops if text[:end].endswith(s)]
        if hits:
            stop = max(hits, key=len)  # at an equal end the longer one starts earlier
            return text[: end - len(stop)], stop
    return text, None


@settings(max_examples=200, derandomize=True, deadline=None)
@given(
    tokens=st.lists(st.integers(97, 100), min_size=1, max_size=30),
    stops=st.lists(st.text(alphabet="abcd", min_size=1, max_size=3), max_size=3),
    cuts=st.lists(st.integers(1, 5), min_size=30, max_size=30),
)
def test_front_request_text_matches_the_oracle_for_any_chunking(tokens, stops, cuts):
    params = SamplingParams(max_tokens=len(tokens), stop=stops)
    req = FrontRequest("r", None, [1], params, _AsciiTokenizer(), arrival_time=0.0)
    chunks, i = [], 0
    for cut in cuts:
        if i >= len(tokens):
            break
        chunks.append(tokens[i : i + cut])
        i += cut
    streamed, out = "", None
    for k, chunk in enumerate(chunks):
        last = k == len(chunks) - 1
        seq = SeqDelta(
            0,
            chunk,
            [-1.0] * len(chunk),
            [0.5] * len(chunk),
            finish_reason="length" if last else None,
        )
        out = req.apply(RequestDelta("r", [seq], last))
        streamed += out.outputs[0].delta
        if out.finished:
            break
    want_text, want_stop = _oracle(tokens, stops)
    choice = out.outputs[0]
    assert out.finished and choice.text == want_text and streamed == want_text
    assert (choice.finish_reason, choice.stop_reason) == (
        ("stop", want_stop) if want_stop else ("length", None)
    )


@settings(max_examples=150, derandomize=True, deadline=None)
@given(
    tokens=st.lists(st.integers(97, 100), min_size=1, max_size=40),
    reads=st.lists(st.booleans(), min_size=40, max_size=40),
    stops=st.lists(st.text(alphabet="abcd", min_size=2, max_size=3), max_size=2),
)
def test_next_output_skips_while_the_reader_is_behind_and_loses_no_text(tokens, reads, stops):
    """One token per step; the reader takes what waits after step i when reads[i]. The text it
    receives is the whole text, once, as when every step's output is built and merged; while it
    is behind no output is built, and the finished output always is."""
    from serving.engine.frontend.request_text import next_output

    params = SamplingParams(max_tokens=len(tokens), stop=stops)
    front = FrontRequest("r", None, [1], params, _AsciiTokenizer(), arrival_time=0.0)
    oracle = FrontRequest("r", None, [1], params, _AsciiTokenizer(), arrival_time=0.0)
    slot, received, built, final = OutputSlot(), "", 0, None
    for i, tok in enumerate(tokens):
        last = i == len(tokens) - 1
        delta = RequestDelta(
            "r", [SeqDelta(0, [tok], [-1.0], [0.5], finish_reason="length" if last else None)], last
        )
        behind = slot.behind
        out = next_output(front, slot, delta)
        final = oracle.apply(delta)
        if out is not None:
            built += 1
            slot.put(out)
        else:
            assert behind and not final.finished  # skipped only while behind, never the end
        if reads[i] or final.finished:
            item = slot.take()
            if item is not None:
                received += item.outputs[0].delta
        if final.finished:
            break
    assert received == final.outputs[0].text
    assert slot.merged <= 1  # only the finished output may land on an unread one
    assert built <= sum(reads[: len(tokens)]) + 2  # the first, one after each read, the last
