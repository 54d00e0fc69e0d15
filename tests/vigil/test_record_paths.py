"""One corpus of sample records, valid and hostile, through the three paths that read records:
`POST /v1/ingest` (the real app), storage's conversion to rows and `vigil check` reading a JSONL
line. They accept and refuse exactly the same records, and refuse only with their validation
error (422, RecordError, RecordFileError), never anything else. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import math
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sidecar_servers import OPERATOR_KEY

from sidecar.app import create_app
from sidecar.evals.scales import BUILTIN_SCALES
from storage.db import session_factory
from storage.records import RecordError, sample_from_record
from vigil.cli.check import read_samples
from vigil.sample_record import limits
from vigil.sample_record.jsonl import RecordFileError

NOW = datetime.now(UTC)
PAST = (NOW - timedelta(days=3)).timestamp()
FUTURE = (NOW + timedelta(days=3)).timestamp()
SIDECAR = limits.SIDECAR_MODEL_NAME

CORPUS: list[tuple[str, object, bool]] = [
    ("minimal", {"prompt": "hi"}, True),
    ("tokens only", {"prompt_tokens": 12}, True),
    ("integral float count", {"prompt": "p", "prompt_tokens": 3.0}, True),
    ("negative count", {"prompt": "p", "prompt_tokens": -1}, False),
    ("negative completion", {"prompt": "p", "completion_tokens": -5}, False),
    ("count as string", {"prompt": "p", "prompt_tokens": "3"}, False),
    ("count as bool", {"prompt": "p", "completion_tokens": True}, False),
    ("fractional count", {"prompt": "p", "prompt_tokens": 2.5}, False),
    ("embedding only", {"prompt_embedding": [0.1, 0.2, 0.3]}, False),
    ("response only", {"response": "r"}, False),
    ("logprob zero", {"prompt": "p", "mean_logprob": 0.0}, True),
    ("logprob positive", {"prompt": "p", "mean_logprob": 0.2}, False),
    ("negative latency", {"prompt": "p", "latency_ms": -1.0}, False),
    ("NaN latency", {"prompt": "p", "ttft_ms": math.nan}, False),
    ("infinite entropy", {"prompt": "p", "mean_entropy": math.inf}, False),
    ("epoch timestamp", {"prompt": "p", "timestamp": PAST}, True),
    ("RFC 3339 with offset", {"prompt": "p", "timestamp": "2026-11-29T13:00:00.5+02:00"}, True),
    ("naive RFC 3339", {"prompt": "p", "timestamp": "2026-11-29T11:00:00"}, False),
    ("future timestamp", {"prompt": "p", "timestamp": FUTURE}, False),
    ("timestamp as bool", {"prompt": "p", "timestamp": True}, False),
    ("eval scores", {"prompt": "p", "eval_score": 0.7, "eval_judge": 4}, True),
    ("eval as string", {"prompt": "p", "eval_judge": "good"}, False),
    ("unknown fields kept", {"prompt": "p", "customer": {"tier": "gold", "ids": [1, 2]}}, True),
    ("NaN in unknown field", {"prompt": "p", "meta": {"x": math.nan}}, False),
    ("huge int in unknown field", {"prompt": "p", "meta": 2**70}, False),
    ("huge list in unknown field", {"prompt": "p", "meta": list(range(20_000))}, False),
    ("NUL in prompt", {"prompt": "a\x00b"}, False),
    ("lone surrogate", {"prompt": "bad \ud800"}, False),
    ("surrogate in unknown field", {"prompt": "p", "meta": ["\udfff"]}, False),
    ("weight at cap", {"prompt": "p", "sample_weight": limits.MAX_SAMPLE_WEIGHT}, True),
    ("weight past cap", {"prompt": "p", "sample_weight": limits.MAX_SAMPLE_WEIGHT * 1.01}, False),
    ("weight zero", {"prompt": "p", "sample_weight": 0}, False),
    (
        "sidecar-model vector",
        {"prompt": "p", "prompt_embedding": [0.01] * 384, "embedding_model": SIDECAR},
        True,
    ),
    (
        "sidecar-model short vector",
        {"prompt": "p", "prompt_embedding": [0.1] * 10, "embedding_model": SIDECAR},
        False,
    ),
    (
        "client vectors",
        {"prompt": "p", "prompt_embedding": [1, 2, 3], "response_embedding": [3, 2, 1]},
        True,
    ),
    (
        "vector dims differ",
        {"prompt": "p", "prompt_embedding": [1, 2, 3], "response_embedding": [1, 2]},
        False,
    ),
    ("empty vector", {"prompt": "p", "prompt_embedding": []}, False),
    ("vector past float32", {"prompt": "p", "prompt_embedding": [1e39, 0.0, 0.0]}, False),
    ("empty segment", {"prompt": "p", "segment": ""}, False),
    ("long segment", {"prompt": "p", "segment": "s" * 129}, False),
    ("tools not a list", {"prompt": "p", "tools": "search"}, False),
    ("id with spaces", {"prompt": "p", "id": "a b"}, False),
    ("not an object", [1, 2], False),
    ("a number", 7, False),
]


def via_storage(record: object) -> bool:
    try:
        sample_from_record(record, source="ingest")
    except RecordError:
        return False
    return True


def via_check(line: bytes, tmp_dir) -> bool:
    path = tmp_dir / f"{uuid.uuid4().hex}.jsonl"
    path.write_bytes(line + b"\n")
    try:
        read_samples(str(path))
    except RecordFileError:
        return False
    finally:
        path.unlink()
    return True


def via_ingest(client: TestClient, line: bytes) -> bool:
    body = b'{"samples": [' + line + b"]}"
    r = client.post(
        "/v1/ingest",
        content=body,
        headers={"Authorization": f"Bearer {OPERATOR_KEY}", "Content-Type": "application/json"},
    )
    assert r.status_code in (200, 422), (r.status_code, r.text[:300])
    return r.status_code == 200


def outcomes(client: TestClient, record: object, tmp_dir) -> tuple[bool, bool, bool]:
    if isinstance(record, dict) and "id" not in record:
        record = {**record, "id": uuid.uuid4().hex}  # no id collisions across examples
    line = json.dumps(record).encode()  # ASCII, NaN as a literal: what a lax client sends
    parsed = json.loads(line)  # storage sees the same object the other two parse
    return via_ingest(client, line), via_storage(parsed), via_check(line, tmp_dir)


# The paths must agree on the record schema. Evaluator scales are a policy layered on ingest only
# (tests/sidecar/test_ingest_policy.py covers them), so they are opened to the schema's own bound.
OPEN_SCALES = {
    name: (-limits.MAX_EVAL_MAGNITUDE, limits.MAX_EVAL_MAGNITUDE) for name in BUILTIN_SCALES
}


@pytest.fixture
def ingest_client(migrated_db, make_settings):
    settings = make_settings(
        migrated_db,
        ingest_max_bytes=32 * 1024 * 1024,
        eval_scales=OPEN_SCALES,
        eval_default_bound=limits.MAX_EVAL_MAGNITUDE,
    )
    app = create_app(settings, session_factory(migrated_db))
    with TestClient(app) as client:
        yield client


def test_the_corpus_gets_one_verdict_on_every_path(ingest_client, tmp_path):
    wrong = {}
    for name, record, valid in CORPUS:
        got = outcomes(ingest_client, record, tmp_path)
        if got != (valid, valid, valid):
            wrong[name] = got
    assert wrong == {}, f"(ingest, storage, check) verdicts that differ from the corpus: {wrong}"


# clean records, and clean records with one to three fields made hostile; vectors are 3-d
# (384/10 under the sidecar's name) so the stored-dimension rule of `client:` models never
# depends on the order examples arrive in
texts = st.text(st.characters(codec=None), max_size=40)  # NUL and lone surrogates included
clean_texts = st.text(
    st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=40
)
numbers = st.one_of(
    st.integers(-(10**20), 10**20), st.floats(), st.sampled_from([0, -0.0, 1e308, 2.5])
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), numbers, texts),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
hostile = st.one_of(
    json_values, st.just(list(range(10_001))), st.just("x" * (limits.MAX_TEXT_CHARS + 1))
)
clean_json = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(-1000, 1000), st.floats(-1e6, 1e6), clean_texts
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(clean_texts, inner, max_size=3),
    max_leaves=6,
)


def clean_fields(dim: int) -> dict:
    vector = st.lists(st.floats(-10, 10), min_size=dim, max_size=dim)
    return {
        "prompt": clean_texts,
        "response": clean_texts,
        "prompt_tokens": st.integers(0, 10**6) | st.integers(0, 1000).map(float),
        "completion_tokens": st.integers(0, 10**6),
        "ttft_ms": st.floats(0, 1e6),
        "latency_ms": st.floats(0, 1e6),
        "mean_logprob": st.floats(-50, 0),
        "mean_entropy": st.floats(0, 20),
        "timestamp": st.floats(0, PAST) | st.just("2026-11-29T11:00:00Z"),
        "segment": clean_texts,
        "tools": st.lists(clean_texts, max_size=3),
        "sample_weight": st.floats(1e-3, limits.MAX_SAMPLE_WEIGHT),
        "eval_score": st.floats(-100, 100),
        "eval_judge": st.floats(1, 5),
        "prompt_embedding": vector,
        "response_embedding": vector,
        "meta": clean_json,
    }


@st.composite
def records(draw):
    model = draw(st.one_of(st.none(), st.just(SIDECAR), st.sampled_from(["mini", "client:mini"])))
    dim = draw(st.sampled_from([384, 10])) if model == SIDECAR else 3
    fields = clean_fields(dim)
    chosen = draw(st.lists(st.sampled_from(sorted(fields)), unique=True, max_size=6))
    record = {name: draw(fields[name]) for name in chosen}
    record.setdefault("prompt", draw(clean_texts))
    if model is not None:
        record["embedding_model"] = model
    for name in draw(st.lists(st.sampled_from([*sorted(fields), "embedding_model"]), max_size=3)):
        record[name] = draw(hostile)
    return draw(st.one_of(st.just(record), st.just(record), st.just(record), hostile))


def test_generated_records_get_one_verdict_on_every_path(ingest_client, tmp_path):
    verdicts: list[bool] = []

    @settings(
        max_examples=150,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(record=records())
    def agree(record):
        ingest, storage, check = outcomes(ingest_client, record, tmp_path)
        assert ingest == storage == check, (ingest, storage, check, record)
        verdicts.append(ingest)

    agree()
    assert sum(verdicts) >= 10 and verdicts.count(False) >= 50, (sum(verdicts), len(verdicts))
