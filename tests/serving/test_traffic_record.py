"""Segment identity, per-request statistics and the sample record, checked against storage's
own record parser (the writer's contract)."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from serving.outputs import CompletionOutput, RequestMetrics, RequestOutput
from serving.traffic.logger import FinishedRequest, TrafficLogger
from serving.traffic.record import build_record, stats_from_output
from serving.traffic.sampler import SampleDecision, TrafficSampler
from serving.traffic.segments import segment_from_request
from storage.records import sample_from_record
from vigil.pseudonym import hash_user
from vigil.record_redaction import RecordRedaction


def _output(
    n_tokens=(5,), prompt="user: mail me at a@b.com", text="call 555-123-4567"
) -> RequestOutput:
    metrics = RequestMetrics(
        arrival_time=100.0,
        first_scheduled_time=100.25,
        first_token_time=100.5,
        last_token_time=101.3,
        finished_time=101.3,
    )
    outs = [
        CompletionOutput(
            index=i,
            text=text,
            delta="",
            token_ids=list(range(k)),
            finish_reason="length",
            mean_logprob=-1.25,
            mean_entropy=2.5,
        )
        for i, k in enumerate(n_tokens)
    ]
    return RequestOutput("req-1", prompt, list(range(7)), outs, True, metrics)


def test_segment_precedence_header_over_metadata_over_user():
    seg = segment_from_request(
        {"X-Vigil-Tenant": "acme", "x-vigil-prompt-version": "v7"},
        user="u-42",
        metadata={"tenant": "meta-t", "segment": "beta", "prompt_version": "v1", "team": "x"},
    )
    assert (seg.tenant, seg.segment, seg.prompt_version, seg.user) == ("acme", "beta", "v7", "u-42")
    assert segment_from_request({}, user="u-42").tenant == "u-42"
    assert segment_from_request({}, user=None).key() == (None, None)
    assert len(segment_from_request({"x-vigil-segment": "s" * 500}).segment) == 128
    assert segment_from_request({}, metadata={"segment": "a\x00\ud800"}).segment == "a__"


def test_stats_from_engine_timestamps():
    out = _output()
    stats = stats_from_output(out, out.outputs[0], end_time=1_700_000_000.0, tools=["search"])
    assert stats.prompt_tokens == 7 and stats.completion_tokens == 5
    assert stats.queue_ms == pytest.approx(250.0)
    assert stats.ttft_ms == pytest.approx(500.0)
    assert stats.latency_ms == pytest.approx(1300.0)
    assert stats.tpot_ms == pytest.approx(800.0 / 4)  # 4 intervals after the first token
    assert stats.finish_reason == "length" and stats.tools == ["search"]


def test_record_matches_the_storage_contract_and_redacts():
    out = _output()
    seg = segment_from_request(
        {"x-vigil-segment": "beta"}, user="carol@example.com", metadata={"team": "ops 555-123-4567"}
    )
    stats = stats_from_output(out, out.outputs[0], end_time=1_700_000_000.0)
    record = build_record(
        stats,
        seg,
        SampleDecision(True, 0.25),
        model_version="mv1",
        extra={"request_id": "req-1"},
    )
    record = RecordRedaction("s3cret", pii=True).record(record)  # what storage's writer applies
    uuid.UUID(record["id"], version=4)
    assert record["sample_weight"] == 4.0
    assert record["prompt"] == "user: mail me at [EMAIL]" and record["response"] == "call [PHONE]"
    user = hash_user("carol@example.com", "s3cret")
    assert record["user"] == user and record["metadata"] == {"team": "ops [PHONE]"}
    parsed = sample_from_record(record)  # storage's validator accepts it unchanged
    row = parsed.row
    assert row["segment"] == "beta" and row["model_version"] == "mv1"
    assert row["prompt_tokens"] == 7 and row["completion_tokens"] == 5
    assert row["timestamp"].timestamp() == 1_700_000_000.0
    assert row["extra"] == {
        "user": user,
        "metadata": {"team": "ops [PHONE]"},
        "request_id": "req-1",
    }


def test_undefined_statistics_are_null_not_nan():
    out = _output(n_tokens=(1,))
    out.outputs[0].mean_logprob = float("nan")
    stats = stats_from_output(out, out.outputs[0], end_time=time.time())
    record = build_record(
        stats, segment_from_request({}), SampleDecision(True, 1.0), model_version=None
    )
    assert record["tpot_ms"] is None and record["mean_logprob"] is None
    sample_from_record(record)


class _ListSink:
    def __init__(self):
        self.records: list[dict] = []

    def submit(self, record: dict) -> bool:
        self.records.append(record)
        return True


def test_logger_writes_one_record_per_choice_off_thread_and_flushes_on_close():
    sink = _ListSink()
    logger = TrafficLogger(TrafficSampler(1.0, 0), sink, model_version="mv")
    for _ in range(20):
        logger.log(FinishedRequest(_output(n_tokens=(3, 4)), segment_from_request({}), ["t"]))
    assert logger.close(timeout=10)
    assert len(sink.records) == 40
    assert {r["choice_index"] for r in sink.records} == {0, 1}
    assert sorted({r["completion_tokens"] for r in sink.records}) == [3, 4]
    assert logger.counters.seen == 20 and logger.counters.submitted == 40
    assert len({r["id"] for r in sink.records}) == 40
    logger.log(FinishedRequest(_output(), segment_from_request({})))  # after close: ignored
    assert logger.counters.seen == 20


class _StalledThreadSink(_ListSink):
    """Holds the logging thread inside submit() until released; other callers pass through."""

    def __init__(self):
        super().__init__()
        self.release = threading.Event()

    def submit(self, record: dict) -> bool:
        if threading.current_thread().name == "vigil-traffic":
            self.release.wait(10)
        return super().submit(record)


def test_logger_overflow_builds_records_on_the_caller_instead_of_dropping():
    sink = _StalledThreadSink()
    logger = TrafficLogger(TrafficSampler(1.0, 0), sink, model_version="mv", max_pending=1)
    for _ in range(6):  # the thread is stuck on the first, the queue holds one: the rest overflow
        logger.log(FinishedRequest(_output(), segment_from_request({})))
    inline = len(sink.records)
    sink.release.set()
    assert logger.close(timeout=10)
    assert inline >= 4  # overflowing requests were recorded by their callers
    assert (
        len(sink.records) == 6 and logger.counters.dropped == 0 and logger.counters.submitted == 6
    )


def test_text_postgresql_cannot_store_is_replaced_not_dropped():
    out = _output(prompt="a\x00b", text="bad \ud800 surrogate")
    stats = stats_from_output(out, out.outputs[0], end_time=time.time())
    record = build_record(
        stats,
        segment_from_request({}, metadata={"k": "v\x00"}),
        SampleDecision(True, 1.0),
        model_version=None,
    )
    assert record["prompt"] == "a\ufffdb" and record["metadata"] == {"k": "v\ufffd"}
    assert record["response"] == "bad ? surrogate"
    record["response"].encode("utf-8")
