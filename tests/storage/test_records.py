"""The record <-> row mapping: normalisation of the sample record and clear errors."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import numpy as np
import pytest

from storage.records import (
    DEFAULT_EVAL_NAME,
    RecordError,
    bytes_to_vector,
    record_from_row,
    sample_from_record,
    vector_to_bytes,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1764414000, datetime(2025, 11, 29, 11, 0, tzinfo=UTC)),
        (1764414000.25, datetime(2025, 11, 29, 11, 0, 0, 250000, tzinfo=UTC)),
        ("2025-11-29T11:00:00Z", datetime(2025, 11, 29, 11, 0, tzinfo=UTC)),
        ("2025-11-29T13:00:00+02:00", datetime(2025, 11, 29, 11, 0, tzinfo=UTC)),
        (datetime(2025, 11, 29, 11, 0), datetime(2025, 11, 29, 11, 0, tzinfo=UTC)),  # naive = UTC
    ],
)
def test_timestamps(value, expected):
    parsed = sample_from_record({"prompt": "p", "timestamp": value}).row["timestamp"]
    assert parsed == expected and parsed.utcoffset().total_seconds() == 0


@pytest.mark.parametrize("value", ["yesterday", True, [1], float("nan"), "2025-11-29T11:00:00"])
def test_bad_timestamp_names_the_field(value):
    with pytest.raises(RecordError, match="timestamp"):
        sample_from_record({"prompt": "p", "timestamp": value})


def test_normalisation_extra_evals_embeddings():
    rec = {
        "id": "r1",
        "timestamp": "2025-11-29T11:00:00Z",
        "prompt": "hello",
        "response": "hi",
        "segment": "s",
        "prompt_tokens": 3.0,
        "ttft_ms": 12,
        "tools": ["search"],
        "eval_score": 0.9,
        "eval_judge": 4,
        "customer_tier": "gold",
        "nested": {"a": [1, 2]},
        "prompt_embedding": [0.5, -1.0, 2.0],
        "response_embedding": [1, 0, 0],
        "embedding_model": "mini",
    }
    parsed = sample_from_record(rec, source="ingest")
    assert parsed.row["id"] == "r1" and parsed.row["source"] == "ingest"
    assert parsed.row["prompt_tokens"] == 3 and isinstance(parsed.row["prompt_tokens"], int)
    assert parsed.row["ttft_ms"] == 12.0 and parsed.row["sample_weight"] == 1.0
    assert parsed.row["extra"] == {"customer_tier": "gold", "nested": {"a": [1, 2]}}
    assert parsed.eval_scores == {DEFAULT_EVAL_NAME: 0.9, "judge": 4.0}
    assert parsed.embedding_model == "client:mini"  # never mixed with the sidecar's own vectors
    assert parsed.embeddings["prompt"].dtype == np.float32
    assert parsed.embeddings["response"].tolist() == [1.0, 0.0, 0.0]
    assert rec["id"] == "r1" and "extra" not in rec  # input untouched

    # back to a record: the same fields, extra merged back at the top level
    row = SimpleNamespace(**parsed.row)
    back = record_from_row(row, parsed.eval_scores)
    assert (
        back["customer_tier"] == "gold" and back["eval_score"] == 0.9 and back["eval_judge"] == 4.0
    )
    assert back["timestamp"] == "2025-11-29T11:00:00.000000Z"
    again = sample_from_record(back, source="ingest")
    assert again.row == parsed.row and again.eval_scores == parsed.eval_scores


def test_missing_id_gets_a_uuid_and_timestamp_defaults_to_now():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    a = sample_from_record({"prompt": "p"}, now=now)
    b = sample_from_record({"prompt": "p"}, now=now)
    assert a.id != b.id and len(a.id) == 36
    assert a.row["timestamp"] == now


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"response": "only"}, "prompt"),
        ({"prompt": "p", "prompt_tokens": -1}, "prompt_tokens"),
        ({"prompt": "p", "prompt_tokens": "3"}, "prompt_tokens"),
        ({"prompt": "p", "ttft_ms": "fast"}, "ttft_ms"),
        ({"prompt": "p", "segment": "x" * 129}, "segment"),
        ({"prompt": "p", "tools": "search"}, "tools"),
        ({"prompt": "p", "sample_weight": 0}, "sample_weight"),
        ({"prompt": "p", "eval_judge": "good"}, "eval_judge"),
        ({"prompt": "p", "id": 7}, "id"),
        ({"prompt": "p", "prompt_embedding": [[1, 2]]}, "prompt_embedding"),
        ({"prompt": "p", "response_embedding": [1, float("inf")]}, "response_embedding"),
        ({"prompt": "p", "blob": object()}, "blob"),
        ({"prompt": "p", "sample_weight": 1e6 + 1}, "sample_weight"),
        (
            {"prompt": "p", "prompt_embedding": [1.0], "response_embedding": [1.0, 2.0]},
            "response_embedding",
        ),
    ],
)
def test_bad_fields_are_named(record, field):
    with pytest.raises(RecordError, match=field):
        sample_from_record(record)


def test_vector_bytes_roundtrip_exact():
    rng = np.random.default_rng(0)
    vec = rng.standard_normal(384).astype(np.float32)
    vec[:4] = [0.0, -0.0, np.finfo(np.float32).tiny / 2, np.finfo(np.float32).max]
    data, dim = vector_to_bytes(vec)
    assert dim == 384 and len(data) == 384 * 4
    assert bytes_to_vector(data, dim).tobytes() == vec.tobytes()
    with pytest.raises(ValueError, match="dim"):
        bytes_to_vector(data, 383)


def test_client_vectors_are_stored_under_client_names():
    bare = sample_from_record({"prompt": "p", "prompt_embedding": [1.0, 2.0]})
    assert bare.embedding_model == "client:unknown"
    named = sample_from_record(
        {"prompt": "p", "prompt_embedding": [0.0] * 384, "embedding_model": "all-MiniLM-L6-v2"}
    )
    assert (
        named.embedding_model == "client:all-MiniLM-L6-v2"
    )  # the sidecar's name, but not its rows
    with pytest.raises(RecordError, match="prompt_embedding"):
        sample_from_record(
            {"prompt": "p", "prompt_embedding": [0.0] * 10, "embedding_model": "all-MiniLM-L6-v2"}
        )


def test_future_timestamps_are_refused_past_the_skew():
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    soon = {"prompt": "p", "timestamp": "2026-11-30T12:04:59Z"}
    assert sample_from_record(soon, now=now).row["timestamp"] == datetime(
        2026, 11, 30, 12, 4, 59, tzinfo=UTC
    )
    with pytest.raises(RecordError, match="timestamp: .* in the future"):
        sample_from_record({"prompt": "p", "timestamp": "2026-11-30T12:05:01Z"}, now=now)
