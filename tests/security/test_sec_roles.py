"""Roles: only operator and admin keys may file engine traffic under a tenant or segment through
`metadata`, or mark it internal; a global key keeps serving, its claims ignored. Keys may carry
a name (`name:key`), which is what their actions are recorded under."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sec_fakes import ADMIN_KEY, API_KEY, OPERATOR_KEY, TENANT_KEY, chat_request
from sidecar_calls import ingest

from serving.server.base.auth import request_segment
from sidecar.app import create_app
from storage.db import session_factory
from vigil.config import ConfigError, load_settings
from vigil.keys import KeyRing, Principal, internal_client_key, key_id, split_named

SETTINGS = dict(secret_key="sec-test-secret-key-0123456789")
CLAIMS = {"tenant": "acme", "segment": "vip", "prompt_version": "v7", "channel": "web"}


def test_a_global_key_cannot_file_traffic_under_a_tenant_or_hide_it():
    """Was: a global key's `metadata` tenant/segment were logged as sent and its
    X-Vigil-Internal mark dropped its traffic from the log."""
    settings = load_settings(**SETTINGS)
    seg = request_segment(
        chat_request({"x-vigil-internal": "canary"}, Principal("g")), settings, None, CLAIMS
    )
    assert (seg.tenant, seg.segment, seg.internal) == (None, None, None)
    assert seg.prompt_version == "v7" and seg.metadata == {"prompt_version": "v7", "channel": "web"}


@pytest.mark.parametrize("role", [{"operator": True}, {"admin": True}])
def test_operator_and_admin_keys_label_traffic_and_mark_it_internal(role):
    settings = load_settings(**SETTINGS)
    seg = request_segment(
        chat_request({"x-vigil-internal": "judge"}, Principal("o", **role)), settings, None, CLAIMS
    )
    assert (seg.tenant, seg.segment, seg.internal) == ("acme", "vip", "judge")


def test_ring_roles_and_named_keys():
    ring = KeyRing(
        api_keys=["ci:global-key-0123456789"],
        tenant_keys={TENANT_KEY: "acme"},
        admin_keys=["alice:" + ADMIN_KEY],
        operator_keys=[OPERATOR_KEY],
    )
    glob = ring.lookup("global-key-0123456789")
    assert glob and glob.name == "ci" and not glob.may_label_others and glob.actor == "key:ci"
    assert ring.lookup("ci:global-key-0123456789") is None  # the name is not part of the secret
    admin = ring.lookup(ADMIN_KEY)
    assert admin.admin and admin.may_label_others and admin.actor == "key:alice"
    operator = ring.lookup(OPERATOR_KEY)
    assert (
        operator.operator and not operator.admin and operator.actor == f"key:{key_id(OPERATOR_KEY)}"
    )
    assert ring.lookup(TENANT_KEY).tenant == "acme" and not ring.lookup(TENANT_KEY).may_label_others


@given(st.text(max_size=80))
def test_split_named_never_loses_the_secret(entry):
    name, key = split_named(entry)
    assert (key == entry) if name is None else (entry == f"{name}:{key}" and key)


def test_a_key_in_two_roles_is_refused_even_under_two_names():
    with pytest.raises(ConfigError, match="OPERATOR_KEYS"):
        load_settings(api_keys=["a:" + API_KEY], operator_keys=["b:" + API_KEY])


def test_operator_keys_fail_closed_outside_development():
    base = dict(env="production", api_keys=[API_KEY], webhook_secret="w" * 32, secret_key="s" * 32)
    with pytest.raises(ConfigError, match="VIGIL_OPERATOR_KEYS: every key needs at least 16"):
        load_settings(**base, operator_keys=["ops:short"])
    assert load_settings(**base).operator_keys == []  # no development operator key there
    assert load_settings().operator_keys == ["vigil-dev-operator-key"]  # local development


def test_the_sidecar_calls_the_engine_with_a_key_that_may_mark_internal():
    assert (
        internal_client_key(
            load_settings(
                api_keys=[API_KEY], operator_keys=["judge:" + OPERATOR_KEY], admin_keys=[ADMIN_KEY]
            )
        )
        == OPERATOR_KEY
    )
    assert (
        internal_client_key(
            load_settings(api_keys=[API_KEY], operator_keys=[], admin_keys=[ADMIN_KEY])
        )
        == ADMIN_KEY
    )


def test_only_operator_keys_ingest_under_a_tenant(migrated_db, make_settings):
    """Was: a global key could ingest samples under any tenant."""
    app = create_app(
        make_settings(migrated_db, api_keys=[API_KEY], operator_keys=[OPERATOR_KEY]),
        session_factory(migrated_db),
    )
    refused = ingest(app, API_KEY, [{"id": "g1", "prompt": "p", "tenant": "acme"}])
    assert refused.status_code == 403 and "operator" in refused.json()["detail"]
    assert ingest(app, API_KEY, [{"id": "g2", "prompt": "p", "segment": "web"}]).status_code == 200
    assert (
        ingest(app, OPERATOR_KEY, [{"id": "g1", "prompt": "p", "tenant": "acme"}]).status_code
        == 200
    )
