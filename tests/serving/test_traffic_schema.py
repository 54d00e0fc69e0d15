"""Every record the traffic logger builds passes the one record schema, whatever the request
looked like: hostile text, tool names, metadata, NaN/inf/negative/huge statistics, tiny rates."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from serving.traffic.record import RequestStats, build_record
from serving.traffic.sampler import SampleDecision
from serving.traffic.segments import segment_from_request
from vigil.record_redaction import RecordRedaction
from vigil.sample_record import limits, validate_record

any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=300)
any_float = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e300, -1e300, 1e-9, -0.0]),
)


@st.composite
def requests(draw):
    stats = RequestStats(
        prompt=draw(any_text),
        response=draw(any_text),
        prompt_tokens=draw(st.integers(0, 100_000)),
        completion_tokens=draw(st.integers(0, 100_000)),
        finish_reason=draw(
            st.one_of(st.none(), st.sampled_from(["stop", "length", "abort"]), any_text)
        ),
        queue_ms=draw(any_float),
        ttft_ms=draw(any_float),
        tpot_ms=draw(any_float),
        latency_ms=draw(any_float),
        mean_logprob=draw(any_float),
        mean_entropy=draw(any_float),
        end_time=draw(st.floats(1e9, 1.7e9)),
        tools=draw(st.lists(any_text, max_size=300)),
    )
    headers = draw(
        st.dictionaries(
            st.sampled_from(["x-vigil-tenant", "x-vigil-segment", "x-vigil-prompt-version"]),
            any_text,
        )
    )
    metadata = draw(st.dictionaries(any_text, any_text, max_size=16))
    segment = segment_from_request(headers, draw(st.one_of(st.none(), any_text)), metadata)
    probability = draw(st.floats(1e-9, 1.0))
    model_version = draw(st.one_of(st.none(), any_text, st.just("m" * 500)))
    return stats, segment, SampleDecision(True, probability), model_version


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(requests(), st.booleans())
def test_built_records_always_pass_the_schema(request, redact):
    """Built, and after the one redaction step (storage's writer's), every record is valid."""
    stats, segment, decision, model_version = request
    record = build_record(
        stats,
        segment,
        decision,
        model_version=model_version,
        extra={"request_id": "req-1", "choice_index": 0},
    )
    record = RecordRedaction("s3cret", pii=redact).record(record)
    valid = validate_record(record)  # raises RecordError if the logger built a bad record
    assert valid.sample_weight == min(decision.weight, limits.MAX_SAMPLE_WEIGHT)
    for name in ("ttft_ms", "tpot_ms", "latency_ms", "queue_ms", "mean_logprob", "mean_entropy"):
        given_value = getattr(stats, name)
        if given_value is None or not math.isfinite(given_value):
            assert getattr(valid, name) is None  # undefined statistics are null, never NaN
