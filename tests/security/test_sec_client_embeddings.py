"""Client embedding models are per tenant: the first vector tenant A stores under a model name
fixes that name's dimension for A only, so tenant B's vectors of another size under the same
name are stored, and each tenant still cannot mix sizes within its own model."""

from __future__ import annotations

from sidecar_calls import ingest
from sqlalchemy import select

from sidecar.app import create_app
from storage.db import session_factory
from storage.models import Embedding

ACME_KEY = "client-emb-acme-key-0123456789"
GLOBEX_KEY = "client-emb-globex-key-0123456789"


def _sample(sample_id: str, dim: int) -> dict:
    return {"id": sample_id, "prompt": "hello", "embedding_model": "text-embedding-3-small",
            "prompt_embedding": [0.5] * dim}  # fmt: skip


def test_one_tenant_cannot_fix_another_tenants_embedding_dimension(migrated_db, make_settings):
    settings = make_settings(migrated_db, tenant_keys={ACME_KEY: "acme", GLOBEX_KEY: "globex"})
    factory = session_factory(migrated_db)
    app = create_app(settings, factory)
    first = ingest(app, GLOBEX_KEY, [_sample("g-1", 3)])  # globex squats the name with 3 values
    assert first.status_code == 200, first.text
    acme = ingest(app, ACME_KEY, [_sample("a-1", 8)])
    assert acme.status_code == 200, acme.text
    assert ingest(app, ACME_KEY, [_sample("a-2", 8)]).status_code == 200
    mixed = ingest(app, ACME_KEY, [_sample("a-3", 3)])  # within one tenant the rule holds
    assert mixed.status_code == 422 and "for this tenant" in mixed.text, mixed.text
    assert ingest(app, GLOBEX_KEY, [_sample("g-2", 8)]).status_code == 422
    with factory() as s:
        dims = sorted(s.scalars(select(Embedding.dim)))
    assert dims == [3, 8, 8]
