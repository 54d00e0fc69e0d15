"""Poison at the ingest door, on SQLite and PostgreSQL: a vector of the wrong dimension under the
sidecar's model name, a weight past the cap or a timestamp from the future fails its whole
request with 422 naming the field; the accepted samples' vectors stay under `client:` names,
and the next drift run over the window completes on the sidecar's own vectors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sidecar_servers import OPERATOR_KEY
from sidecar_world import prepare
from sqlalchemy import func, select

from sidecar.app import create_app
from sidecar.jobs.drift import run_drift_job
from storage.db import session_factory
from storage.models import Embedding, Sample
from vigil.sample_record.limits import SIDECAR_MODEL_NAME

AUTH = {"Authorization": f"Bearer {OPERATOR_KEY}"}


def _good(i: int, at: datetime) -> dict:
    vec = np.random.default_rng(i).normal(size=384).tolist()
    return {"id": f"client-{i}", "timestamp": at.timestamp(), "prompt": f"client question {i}",
            "response": "an answer", "prompt_embedding": vec, "response_embedding": vec,
            "embedding_model": SIDECAR_MODEL_NAME}  # fmt: skip


def _count(factory, *where) -> int:
    with factory() as s:
        return s.scalar(select(func.count()).select_from(Sample).where(*where))


@pytest.mark.parametrize(
    ("poison", "path"),
    [({"prompt_embedding": [0.1] * 10}, "samples[3].prompt_embedding"),
     ({"sample_weight": 1e7}, "samples[3].sample_weight"),
     ({"timestamp": "future"}, "samples[3]: timestamp")],
)  # fmt: skip
def test_one_poisoned_sample_fails_its_request(migrated_db, make_settings, poison, path):
    settings = make_settings(migrated_db)
    factory = session_factory(migrated_db)
    now = datetime.now(UTC)
    if poison.get("timestamp") == "future":
        poison = {
            "timestamp": (now + timedelta(seconds=settings.max_future_skew_s + 60)).timestamp()
        }
    samples = [_good(i, now - timedelta(minutes=5)) for i in range(5)]
    samples[3].update(poison)
    with TestClient(create_app(settings, factory)) as client:
        r = client.post("/v1/ingest", json={"samples": samples}, headers=AUTH)
    assert r.status_code == 422, r.text
    body = r.json()
    assert path in body["detail"] or path in [e["path"] for e in body.get("errors", [])], body
    assert _count(factory) == 0  # nothing of the request was stored


# a whole pipeline on one backend; the storage tests cover both
@pytest.mark.parametrize("migrated_db", ["sqlite"], indirect=True)
def test_drift_run_completes_after_a_poisoned_request(migrated_db, make_settings, embedder):
    settings = make_settings(migrated_db)
    factory = session_factory(migrated_db)
    world = prepare(settings, factory, None)
    start, end = world.window
    inside = start + (end - start) / 2
    samples = [_good(i, inside) for i in range(6)]
    poisoned = [*samples[:3], {**samples[3], "prompt_embedding": [0.1] * 10}, *samples[4:]]
    with TestClient(create_app(settings, factory)) as client:
        refused = client.post("/v1/ingest", json={"samples": poisoned}, headers=AUTH)
        assert refused.status_code == 422
        assert "samples[3].prompt_embedding" in [e["path"] for e in refused.json()["errors"]]
        assert "384" in refused.json()["detail"]
        accepted = client.post("/v1/ingest", json={"samples": samples}, headers=AUTH)
        assert accepted.status_code == 200, accepted.text
    with factory() as s:
        models = set(s.scalars(select(Embedding.model).where(Embedding.sample_id.like("client-%"))))
    assert models == {"client:" + SIDECAR_MODEL_NAME}

    outcome = run_drift_job(settings, factory, datetime.now(UTC)).windows
    assert [o.status for o in outcome] == ["done"]
    assert outcome[0].num_samples == len(world.drift_records) + len(samples)
    with factory() as s:  # the drift job embedded the ingested samples itself, under its model
        own = s.scalar(
            select(func.count())
            .select_from(Embedding)
            .where(Embedding.model == SIDECAR_MODEL_NAME, Embedding.sample_id.like("client-%"))
        )
    assert own == 2 * len(samples)
