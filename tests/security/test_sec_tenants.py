"""Keys bound to tenants: a tenant key writes only its tenant (ingest: 403 for another tenant,
its tenant filled in otherwise; engine traffic logged under it). `x-vigil-*` headers count only
from trusted proxies, and `user` is stored as a keyed pseudonym."""

from __future__ import annotations

import pytest
from sec_fakes import API_KEY, OPERATOR_KEY, TENANT_KEY, chat_request
from sidecar_calls import ingest
from sqlalchemy import select

from serving.server.base.auth import hash_user, request_segment
from sidecar.app import create_app
from storage.db import session_factory
from storage.models import Sample
from vigil.config import load_settings
from vigil.keys import Principal


def test_tenant_key_writes_only_its_tenant(migrated_db, make_settings):
    """Was: any key could write samples for any tenant (and so raise or mask its alerts)."""
    factory = session_factory(migrated_db)
    app = create_app(
        make_settings(
            migrated_db,
            api_keys=[API_KEY],
            tenant_keys={TENANT_KEY: "acme"},
            operator_keys=[OPERATOR_KEY],
        ),
        factory,
    )
    foreign = ingest(
        app,
        TENANT_KEY,
        [
            {"id": "a1", "prompt": "p", "tenant": "acme"},
            {"id": "a2", "prompt": "p", "tenant": "globex"},
        ],
    )
    assert foreign.status_code == 403 and "globex" in foreign.json()["detail"]
    own = ingest(
        app,
        TENANT_KEY,
        [{"id": "b1", "prompt": "p", "tenant": "acme"}, {"id": "b2", "prompt": "p"}],
    )
    assert own.status_code == 200, own.text
    assert (
        ingest(app, OPERATOR_KEY, [{"id": "c1", "prompt": "p", "tenant": "globex"}]).status_code
        == 200
    )
    with factory() as s:
        tenants = dict(s.execute(select(Sample.id, Sample.tenant)).all())
    assert tenants == {"b1": "acme", "b2": "acme", "c1": "globex"}


SETTINGS = dict(trusted_proxies=["10.0.0.0/8"], secret_key="sec-test-secret-key-0123456789")


def test_segment_headers_count_only_from_trusted_proxies():
    settings = load_settings(**SETTINGS)
    headers = {"x-vigil-tenant": "globex", "x-vigil-segment": "vip"}
    untrusted = request_segment(
        chat_request(headers, Principal("k"), "203.0.113.7"), settings, None, None
    )
    assert untrusted.tenant is None and untrusted.segment is None
    trusted = request_segment(
        chat_request(headers, Principal("k"), "10.9.8.7"), settings, None, None
    )
    assert (trusted.tenant, trusted.segment) == ("globex", "vip")


def test_tenant_key_traffic_is_logged_under_its_tenant():
    settings = load_settings(**SETTINGS)
    bound = Principal("k", tenant="acme")
    for peer in ("10.0.0.1", "203.0.113.7"):
        seg = request_segment(
            chat_request({"x-vigil-tenant": "globex"}, bound, peer),
            settings,
            None,
            {"tenant": "initech"},
        )
        assert seg.tenant == "acme"


def test_a_tenant_key_cannot_hide_its_traffic_as_internal():
    settings = load_settings(**SETTINGS)
    marked = {"x-vigil-internal": "canary"}
    operator = request_segment(
        chat_request(marked, Principal("k", operator=True), "203.0.113.7"), settings, None, None
    )
    assert operator.internal == "canary"
    tenant = request_segment(
        chat_request(marked, Principal("k", tenant="acme"), "203.0.113.7"), settings, None, None
    )
    assert tenant.internal is None and tenant.tenant == "acme"


@pytest.mark.parametrize("user", ["alice@example.com", "bob", "x" * 256])
def test_user_is_stored_as_a_keyed_pseudonym(user):
    settings = load_settings(**SETTINGS)
    seg = request_segment(chat_request({}, Principal("k"), "203.0.113.7"), settings, user, None)
    assert seg.user == hash_user(user, settings.secret_key) and user not in (seg.user, seg.tenant)
    assert "@" not in seg.user and seg.user != hash_user(user, "another-secret-0123456789")


def test_ingest_batch_size_is_checked_before_validating_every_sample(
    migrated_db, make_settings, monkeypatch
):
    """Was: every sample of an oversized batch was validated, and only then counted."""
    from pydantic import model_validator

    import sidecar.ingest.routes as ingest_routes

    validated = []
    (record_type,) = ingest_routes.IngestBody.model_fields["samples"].annotation.__args__

    class CountingRecord(record_type):
        @model_validator(mode="before")
        @classmethod
        def _count(cls, data):
            validated.append(1)
            return data

    # the route builds its bounded body from this type when the app is made
    monkeypatch.setattr(ingest_routes, "SAMPLES_TYPE", list[CountingRecord])
    app = create_app(
        make_settings(migrated_db, api_keys=[API_KEY], ingest_max_samples=10),
        session_factory(migrated_db),
    )
    r = ingest(app, API_KEY, [{"id": f"s{i}", "prompt": "p"} for i in range(5000)])
    assert r.status_code == 413 and "limit is 10" in r.json()["detail"]
    assert 1 <= len(validated) <= 11
