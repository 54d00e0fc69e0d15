"""The one sample-record schema: its rules one by one, timestamps against pandas' parser, the
caps at their edges, and the names it shares with the sidecar."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vigil.sample_record import (
    MAX_SAMPLE_WEIGHT,
    RecordError,
    SampleRecord,
    check_not_future,
    client_model_name,
    limits,
    validate_record,
)


def ok(**fields) -> SampleRecord:
    return validate_record({"prompt": "p", **fields})


def refused(field: str, **fields) -> str:
    with pytest.raises(RecordError) as info:
        validate_record({"prompt": "p", **fields})
    assert field in str(info.value), str(info.value)
    return str(info.value)


def test_counts_are_non_negative_integers():
    assert ok(prompt_tokens=3.0).prompt_tokens == 3 and ok(prompt_tokens=0).prompt_tokens == 0
    refused("prompt_tokens", prompt_tokens=-1)
    refused("prompt_tokens", prompt_tokens="3")
    refused("prompt_tokens", prompt_tokens=2.5)
    refused("completion_tokens", completion_tokens=True)
    refused("prompt_tokens", prompt_tokens=limits.MAX_TOKENS + 1)


def test_numbers_are_finite_and_signed_as_their_meaning():
    assert ok(mean_logprob=0.0).mean_logprob == 0.0 and ok(mean_logprob=-3).mean_logprob == -3.0
    refused("mean_logprob", mean_logprob=1e-9)
    refused("mean_entropy", mean_entropy=-0.1)
    refused("ttft_ms", ttft_ms=-1)
    refused("latency_ms", latency_ms=float("inf"))
    refused("queue_ms", queue_ms=float("nan"))
    refused("tpot_ms", tpot_ms="12")
    refused("eval_score", eval_score=float("nan"))
    refused("eval_judge", eval_judge="good")
    refused("eval_judge", eval_judge=1e300)
    refused("eval_default", eval_default=1.0)  # the name eval_score is stored under


def test_sample_weight_cap_is_the_inverse_of_the_smallest_rate():
    assert pytest.approx(1.0) == MAX_SAMPLE_WEIGHT * limits.MIN_SAMPLE_RATE
    assert ok(sample_weight=MAX_SAMPLE_WEIGHT).sample_weight == MAX_SAMPLE_WEIGHT
    assert ok(sample_weight=None).sample_weight == 1.0
    refused("sample_weight", sample_weight=MAX_SAMPLE_WEIGHT * (1 + 1e-12))
    refused("sample_weight", sample_weight=0)


def test_a_record_needs_prompt_or_prompt_tokens():
    assert validate_record({"prompt_tokens": 4}).prompt is None
    for record in ({"response": "r"}, {"prompt_embedding": [0.1, 0.2]}, {"prompt": None}):
        with pytest.raises(RecordError, match="'prompt' or 'prompt_tokens'"):
            validate_record(record)


def test_text_limits_and_unstorable_characters():
    refused("segment", segment="x" * 129)
    refused("segment", segment="")
    refused("prompt", prompt="a\x00b")
    refused("response", response="\ud800")
    refused("tools", tools=["ok", ""])
    refused("tools", tools=["t"] * 257)
    refused("id", id="has space")
    assert ok(prompt="x" * limits.MAX_TEXT_CHARS).prompt is not None


def test_unknown_fields_are_kept_when_they_are_plain_json():
    rec = ok(customer={"tier": "gold", "ids": [1, 2.5, None, True]}, eval_judge=4)
    assert rec.unknown_fields == {"customer": {"tier": "gold", "ids": [1, 2.5, None, True]}}
    assert rec.eval_scores == {"judge": 4.0}
    refused("meta.k[0]", meta={"k": ["\x00"]})
    refused("meta", meta={"k": float("inf")})
    refused("big", big=2**64)
    deep: list = [1]
    for _ in range(limits.MAX_EXTRA_DEPTH + 1):
        deep = [deep]
    refused("nest", nest=deep)
    refused("many", many=list(range(limits.MAX_EXTRA_VALUES + 1)))
    refused("field name", **{"x" * 129: 1})


def test_embedding_dimensions():
    assert ok(prompt_embedding=[0.1] * 384, embedding_model="all-MiniLM-L6-v2").prompt_embedding
    msg = refused(
        "prompt_embedding", prompt_embedding=[0.1] * 10, embedding_model="all-MiniLM-L6-v2"
    )
    assert "384" in msg
    refused(
        "response_embedding",
        prompt_embedding=[0.1] * 384,
        response_embedding=[0.1] * 10,
        embedding_model="client:all-MiniLM-L6-v2",
    )
    refused("response_embedding", prompt_embedding=[1.0, 2.0], response_embedding=[1.0])
    refused("prompt_embedding", prompt_embedding=[])
    refused("prompt_embedding", prompt_embedding=[1e39])  # beyond float32: would store inf
    refused("prompt_embedding", prompt_embedding=[0.0] * (limits.MAX_EMBEDDING_DIM + 1))
    assert ok(prompt_embedding=[1.0, 2.0], response_embedding=[3, 4]).embeddings["response"] == [
        3.0,
        4.0,
    ]


def test_client_model_names_are_prefixed_once():
    assert client_model_name(None) == "client:unknown"
    assert client_model_name("all-MiniLM-L6-v2") == "client:all-MiniLM-L6-v2"
    assert client_model_name("client:mini") == "client:mini"
    assert (
        ok(prompt_embedding=[1.0], embedding_model="mini").stored_embedding_model == "client:mini"
    )


def test_known_dimensions_match_the_sidecar_model():
    from sidecar.embedder import DIM, MODEL_NAME

    assert limits.SIDECAR_MODEL_NAME == MODEL_NAME
    assert limits.KNOWN_EMBEDDING_DIMS[MODEL_NAME] == DIM


@pytest.mark.parametrize(
    "value",
    [
        "2026-11-29T11:00:00",
        "2026-11-29",
        "20261129T110000Z",
        "2026-02-30T00:00:00Z",
        "yesterday",
        True,
        [1],
        1e10,
        -1,
    ],
)
def test_bad_timestamps(value):
    refused("timestamp", timestamp=value)


def test_future_timestamps_beyond_the_skew_are_refused():
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    check_not_future(now + timedelta(seconds=300), now, 300)
    with pytest.raises(ValueError, match="in the future"):
        check_not_future(now + timedelta(seconds=301), now, 300)
    late = {"prompt": "p", "timestamp": (now + timedelta(minutes=10)).timestamp()}
    with pytest.raises(RecordError, match="timestamp"):
        validate_record(late, now=now)
    assert validate_record(late, now=now, max_future_skew_s=3600).timestamp is not None


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(
    moment=st.datetimes(
        min_value=datetime(1970, 1, 2), max_value=datetime(2199, 12, 30), timezones=st.just(UTC)
    ),
    offset_min=st.integers(-23 * 60, 23 * 60),
    digits=st.integers(0, 9),
    zulu=st.booleans(),
)
def test_rfc3339_strings_agree_with_pandas(moment, offset_min, digits, zulu):
    zone = timezone(timedelta(minutes=0 if zulu else offset_min))
    local = moment.astimezone(zone)
    text = local.strftime("%Y-%m-%dT%H:%M:%S")
    if digits:
        text += "." + f"{local.microsecond:06d}{'987'}"[:digits]
    text += "Z" if zulu else local.strftime("%z")[:3] + ":" + local.strftime("%z")[3:]
    parsed = validate_record(
        {"prompt": "p", "timestamp": text}, now=datetime(2200, 1, 1, tzinfo=UTC)
    )
    oracle = pd.Timestamp(text).tz_convert("UTC").floor("us").to_pydatetime()
    assert parsed.timestamp == oracle


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(st.floats(min_value=0, max_value=limits.MAX_EPOCH_S, exclude_max=True))
def test_epoch_seconds_agree_with_pandas(seconds):
    parsed = validate_record(
        {"prompt": "p", "timestamp": seconds}, now=datetime(2200, 1, 1, tzinfo=UTC)
    )
    oracle = pd.Timestamp(seconds, unit="s", tz="UTC")
    assert abs((parsed.timestamp - oracle.to_pydatetime(warn=False)).total_seconds()) < 1e-5


def test_json_schema_export_names_every_field():
    schema = SampleRecord.model_json_schema()
    assert set(SampleRecord.model_fields) == set(schema["properties"])
    assert schema["additionalProperties"] is True
    assert schema["properties"]["sample_weight"]["maximum"] == MAX_SAMPLE_WEIGHT
    assert {"type": "string", "format": "date-time"} in schema["properties"]["timestamp"]["anyOf"][
        0
    ]["anyOf"]


def test_sampling_rates_below_the_weight_cap_are_a_config_error():
    from vigil.config import ConfigError, load_settings

    assert load_settings(sample_rate=0.0).sample_rate == 0.0
    assert load_settings(sample_rate=limits.MIN_SAMPLE_RATE).sample_rate == limits.MIN_SAMPLE_RATE
    with pytest.raises(ConfigError, match="VIGIL_SAMPLE_RATE"):
        load_settings(sample_rate=limits.MIN_SAMPLE_RATE / 2)
    assert load_settings().max_future_skew_s == limits.DEFAULT_MAX_FUTURE_SKEW_S


def test_vigil_schema_prints_the_json_schema(capsys):
    import json

    from vigil.cli.main import main

    assert main(["schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed.pop("$schema").startswith("https://json-schema.org/")
    assert printed == json.loads(json.dumps(SampleRecord.model_json_schema()))
    assert printed["properties"]["prompt_tokens"]["anyOf"][0] == {
        "type": "integer",
        "minimum": 0,
        "maximum": limits.MAX_TOKENS,
    }
    assert "sample_weight" in printed["description"]  # the rules travel with the schema


python_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(),
        st.binary(max_size=8),
        st.just(object()),
        st.complex_numbers(),
        st.datetimes(),
    ),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.frozensets(st.integers())
        | st.dictionaries(
            st.one_of(
                st.text(max_size=12),
                st.integers(),
                st.sampled_from(
                    [
                        "prompt",
                        "prompt_tokens",
                        "timestamp",
                        "tools",
                        "eval_x",
                        "prompt_embedding",
                        "sample_weight",
                    ]
                ),
            ),
            inner,
            max_size=6,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(python_values)
def test_any_python_value_is_accepted_or_refused_with_a_record_error(value):
    try:
        validate_record(value)
    except RecordError as exc:
        assert str(exc)  # a message naming what is wrong


def test_self_referencing_unknown_field_is_refused_not_a_recursion_error():
    loop: dict = {}
    loop["again"] = loop
    refused("loop", loop=loop)
