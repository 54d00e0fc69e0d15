"""POST /v1/ingest against the real app under uvicorn on 127.0.0.1, on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import httpx
import pytest
from sidecar_servers import OPERATOR_KEY, UvicornThread
from sqlalchemy import func, select

from sidecar.app import create_app
from storage.db import session_factory
from storage.models import EvalScore, Sample

AUTH = {"Authorization": f"Bearer {OPERATOR_KEY}"}


def sample(i: int, **fields) -> dict:
    return {"id": f"ing-{i}", "timestamp": 1764410000 + i, "prompt": f"question {i}",
            "response": f"answer {i}", "segment": "web", "ttft_ms": 12.5, "eval_judge": 4.0,
            "custom_field": {"a": i}, **fields}  # fmt: skip


@pytest.fixture
def server(migrated_db, make_settings):
    settings = make_settings(migrated_db, ingest_max_bytes=20_000, ingest_max_samples=10)
    factory = session_factory(migrated_db)
    with UvicornThread(create_app(settings, factory)) as srv:
        srv.factory = factory
        yield srv


def count(factory, model=Sample) -> int:
    with factory() as s:
        return s.scalar(select(func.count()).select_from(model))


def test_ingest_stores_samples_idempotently(server):
    body = {"samples": [sample(1), sample(2), sample(2)]}  # a repeat inside one body too
    r = httpx.post(f"{server.url}/v1/ingest", json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.json() == {"received": 3, "inserted": 2, "duplicates": 1, "weights_clipped": 0}
    again = httpx.post(
        f"{server.url}/v1/ingest", json={"samples": [sample(1), sample(3)]}, headers=AUTH
    )
    assert again.json() == {"received": 2, "inserted": 1, "duplicates": 1, "weights_clipped": 0}
    assert count(server.factory) == 3
    assert count(server.factory, EvalScore) == 3  # eval_judge became an eval score
    with server.factory() as s:
        row = s.get(Sample, "ing-1")
        assert row.source == "ingest" and row.segment == "web" and row.ttft_ms == 12.5
        assert row.extra == {"custom_field": {"a": 1}}
        assert int(row.timestamp.timestamp()) == 1764410001


def test_ingest_requires_an_api_key(server):
    body = {"samples": [sample(1)]}
    assert httpx.post(f"{server.url}/v1/ingest", json=body).status_code == 401
    bad = httpx.post(f"{server.url}/v1/ingest", json=body, headers={"Authorization": "Bearer nope"})
    assert bad.status_code == 401 and "invalid API key" in bad.text
    assert count(server.factory) == 0


@pytest.mark.parametrize(
    ("body", "path", "words"),
    [
        (
            {"samples": [sample(1), sample(2, prompt_tokens=-3)]},
            "samples[1].prompt_tokens",
            "greater than or equal",
        ),
        ({"samples": [sample(1, ttft_ms="fast")]}, "samples[0].ttft_ms", "number"),
        (
            {"samples": [{"id": "x", "response": "no prompt"}]},
            "samples[0]",
            "'prompt' or 'prompt_tokens'",
        ),
        ({"samples": [sample(1, timestamp="yesterday")]}, "samples[0].timestamp", ""),
        ({"samples": [sample(1, eval_judge="good")]}, "samples[0]", "eval_judge"),
        ({"samples": []}, "samples", "at least 1"),
        ({"records": [sample(1)]}, "samples", "required"),
        ({"samples": [sample(1, id="bad id with spaces")]}, "samples[0].id", "pattern"),
    ],
)
def test_malformed_bodies_get_422_with_field_paths(server, body, path, words):
    r = httpx.post(f"{server.url}/v1/ingest", json=body, headers=AUTH)
    assert r.status_code == 422, r.text
    paths = [e["path"] for e in r.json()["errors"]]
    assert path in paths, paths
    assert words in r.json()["detail"]
    assert count(server.factory) == 0  # nothing of a refused body is stored


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b'{"samples": [{"id": "n", "prompt": "a\\u0000b"}]}', "NUL character"),
        (
            b'{"samples": [{"id": "n", "prompt": "p", "meta": {"k": ["\\u0000"]}}]}',
            "meta.k[0] contains a NUL",
        ),
        (b'{"samples": [{"id": "s", "prompt": "\\ud800"}]}', "lone surrogate"),
    ],
)
def test_text_no_database_can_store_is_422(server, raw, words):
    headers = {**AUTH, "Content-Type": "application/json"}
    r = httpx.post(f"{server.url}/v1/ingest", content=raw, headers=headers)
    assert r.status_code == 422 and words in r.json()["detail"], r.text
    assert count(server.factory) == 0


def test_invalid_json_is_422(server):
    r = httpx.post(
        f"{server.url}/v1/ingest",
        content=b'{"samples": [',
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert r.status_code == 422 and "JSON" in r.json()["detail"]


def test_oversized_bodies_get_413(server):
    big = {"samples": [sample(1, prompt="x" * 30_000)]}
    r = httpx.post(f"{server.url}/v1/ingest", json=big, headers=AUTH)  # Content-Length says so
    assert r.status_code == 413 and "20000 bytes" in r.json()["detail"]

    def chunks():  # chunked transfer encoding: no Content-Length, the stream itself is counted
        data = json.dumps(big).encode()
        for i in range(0, len(data), 4096):
            yield data[i : i + 4096]

    streamed = httpx.post(
        f"{server.url}/v1/ingest",
        content=chunks(),
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert streamed.status_code == 413 and "streamed more than 20000" in streamed.json()["detail"]

    many = {"samples": [{"id": f"m{i}", "prompt_tokens": i} for i in range(11)]}
    r = httpx.post(f"{server.url}/v1/ingest", json=many, headers=AUTH)
    assert r.status_code == 413 and "limit is 10" in r.json()["detail"]
    assert count(server.factory) == 0


def test_health_reports_the_database(server):
    r = httpx.get(f"{server.url}/health")
    assert r.status_code == 200 and r.json()["database"] is True
