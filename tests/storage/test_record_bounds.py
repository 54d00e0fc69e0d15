"""Storage's defences behind the record schema, on SQLite and PostgreSQL: the database itself
refuses out-of-bound weights and counts (migration 0003), clamps rows older code let in, keeps
client vectors under `client:` names with one dimension per model, and never returns them for
the sidecar's model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from storage.db import dispose_engines, session_scope
from storage.migrate import upgrade
from storage.records import RecordError
from storage.repositories.embeddings import (
    EmbeddingRow,
    fetch_window_embeddings,
    samples_missing_embeddings,
    store_embeddings,
)
from storage.repositories.samples import fetch_window, insert_samples
from vigil.sample_record.limits import SIDECAR_MODEL_NAME

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
INSERT = text(
    "INSERT INTO samples (id, timestamp, sample_weight, source, prompt_tokens) "
    "VALUES (:id, :ts, :w, 'engine', :n)"
)


def _raw_insert(url: str, sample_id: str, weight: float, tokens: int | None = 1) -> None:
    with session_scope(url) as s:
        s.execute(INSERT, {"id": sample_id, "ts": T0, "w": weight, "n": tokens})


@pytest.mark.parametrize(("weight", "tokens"), [(1e6 * 1.5, 1), (0.0, 1), (-1.0, 1), (1.0, -3)])
def test_the_database_refuses_what_the_schema_refuses(migrated_db, weight, tokens):
    with pytest.raises(IntegrityError, match="ck_samples_"):
        _raw_insert(migrated_db, "bad", weight, tokens)
    _raw_insert(migrated_db, "edge", 1e6, 0)  # the bounds themselves are allowed
    with (
        pytest.raises(IntegrityError, match="ck_samples_sample_weight_range"),
        session_scope(migrated_db) as s,
    ):
        s.execute(text("UPDATE samples SET sample_weight = 2e6 WHERE id = 'edge'"))


def test_migration_brings_older_rows_within_the_bounds(db_url):
    upgrade(db_url, "0002")
    _raw_insert(db_url, "heavy", 5e6, -2)
    _raw_insert(db_url, "fine", 4.0, 7)
    upgrade(db_url)
    with session_scope(db_url) as s:
        rows = dict(s.execute(text("SELECT id, sample_weight FROM samples")).all())
        tokens = dict(s.execute(text("SELECT id, prompt_tokens FROM samples")).all())
    dispose_engines()
    assert rows == {"heavy": 1e6, "fine": 4.0} and tokens == {"heavy": None, "fine": 7}


def _record(i: int, **fields) -> dict:
    return {
        "id": f"c{i}",
        "timestamp": (T0 + timedelta(minutes=i)).timestamp(),
        "prompt": f"p{i}",
        **fields,
    }


def test_client_vectors_keep_one_dimension_per_model(migrated_db):
    with session_scope(migrated_db) as s:
        insert_samples(s, [_record(1, prompt_embedding=[1.0, 2.0, 3.0], embedding_model="mini")])
    with (
        pytest.raises(
            RecordError, match="'c2': prompt_embedding has 4 values; client:mini vectors have 3"
        ),
        session_scope(migrated_db) as s,
    ):
        insert_samples(s, [_record(2, prompt_embedding=[1.0] * 4, embedding_model="mini")])
    # a model new to the database: the first vector of the batch fixes the dimension
    with (
        pytest.raises(RecordError, match="'c4': response_embedding has 2 values"),
        session_scope(migrated_db) as s,
    ):
        insert_samples(
            s, [_record(3, response_embedding=[1.0] * 5), _record(4, response_embedding=[1.0, 2.0])]
        )
    with session_scope(migrated_db) as s:  # nothing of a refused call was stored
        ids = [r["id"] for r in fetch_window(s, T0, T0 + timedelta(hours=1))]
        insert_samples(s, [_record(5, prompt_embedding=[0.0] * 3, embedding_model="client:mini")])
    assert ids == ["c1"]


def test_the_sidecar_model_never_reads_client_vectors(migrated_db):
    poisoned = _record(
        1,
        prompt_embedding=[0.5] * 384,
        response_embedding=[0.5] * 384,
        embedding_model=SIDECAR_MODEL_NAME,
    )  # claims the sidecar's own model
    with session_scope(migrated_db) as s:
        insert_samples(s, [poisoned, _record(2)])
    end = T0 + timedelta(hours=1)
    with session_scope(migrated_db) as s:
        window = fetch_window(s, T0, end, embedding_model=SIDECAR_MODEL_NAME)
        assert all("prompt_embedding" not in r and "response_embedding" not in r for r in window)
        ids, matrix = fetch_window_embeddings(s, T0, end, SIDECAR_MODEL_NAME)
        assert ids == [] and matrix.size == 0
        # the sidecar still embeds the sample itself
        assert {r["id"] for r in samples_missing_embeddings(s, SIDECAR_MODEL_NAME)} == {"c1", "c2"}
        client = fetch_window(s, T0, end, embedding_model="client:" + SIDECAR_MODEL_NAME)
        assert client[0]["prompt_embedding"].shape == (384,)
        with pytest.raises(ValueError, match="reserved"):
            store_embeddings(s, [EmbeddingRow("c2", "prompt", "client:mini", [1.0])])
