"""Names a client chooses never carry markup: every one is refused at ingest with a 422 naming
the field, the engine's own labels are made safe, and the rule is one character set
(`vigil.sample_record.limits.NAME_CHARS`)."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sidecar_calls import ingest
from sidecar_servers import OPERATOR_KEY
from sqlalchemy import func, select

from serving.traffic.segments import segment_from_request
from sidecar.app import create_app
from storage.db import session_factory
from storage.models import Sample
from vigil.config import load_settings
from vigil.sample_record import RecordError, validate_record
from vigil.sample_record.names import check_name, name_problem, safe_name

SCRIPT = "x</script><script>window.__pwned=1</script>"
SAFE = set(string.ascii_letters + string.digits + "._-:/@+ ")


def _base(**fields) -> dict:
    return {"id": "n-1", "prompt": "hello", **fields}


HOSTILE = [
    ("tenant", _base(tenant=SCRIPT)),
    ("segment", _base(segment=SCRIPT)),
    ("prompt_version", _base(prompt_version='v1"onload="x')),
    ("model_version", _base(model_version="<img src=x onerror=alert(1)>")),
    ("embedding_model", _base(embedding_model=SCRIPT, prompt_embedding=[0.1, 0.2])),
    ("finish_reason", _base(finish_reason="stop'&")),
    ("tools[0]", _base(tools=[SCRIPT])),
    ("eval_x</script>", _base(**{"eval_x</script>": 1.0})),
    ("field name", _base(**{"<b>field": 1})),
    ("metadata", _base(metadata={"<svg onload=alert(1)>": "v"})),
    ("segment", _base(segment="web\nX-Injected: 1")),
]


@pytest.fixture
def app(migrated_db, make_settings):
    yield create_app(make_settings(migrated_db), session_factory(migrated_db))


def test_hostile_names_are_refused_with_a_422_naming_the_field(app, migrated_db):
    for field, record in HOSTILE:
        response = ingest(app, OPERATOR_KEY, [record])
        assert response.status_code == 422, (field, response.text)
        assert field in response.text and "names use only" in response.text, response.text
    with session_factory(migrated_db)() as session:
        assert session.scalar(select(func.count()).select_from(Sample)) == 0
    ok = _base(segment="web", model_version="Qwen/Qwen3-4B", eval_llm_judge=4.0,
               tools=["get_weather"], metadata={"user-agent": "curl/8.5"})  # fmt: skip
    assert ingest(app, OPERATOR_KEY, [ok]).status_code == 200


def test_engine_labels_and_metadata_keys_are_made_safe():
    """The engine cannot refuse a served request for its label: it replaces what is unsafe, and
    its record passes the schema every other path uses."""
    info = segment_from_request(
        {"x-vigil-segment": SCRIPT, "x-vigil-tenant": "acme<"},
        metadata={"prompt_version": "v\x00'1", "<k>": "<value stays text>"},
    )
    for label in (info.tenant, info.segment, info.prompt_version, *info.metadata):
        assert label and set(label) <= SAFE, label
    assert info.metadata["_k_"] == "<value stays text>"  # values are text, not names


@settings(max_examples=200, deadline=None, database=None)
@given(st.text(max_size=40))
def test_a_name_is_safe_exactly_when_every_character_is_in_the_set(text):
    safe = bool(text) and set(text) <= SAFE
    assert (name_problem(text) is None) == safe
    if text:
        assert check_name(safe_name(text)) == safe_name(text)
        assert len(safe_name(text)) == len(text)
    if not safe:
        with pytest.raises(RecordError, match="names use only"):
            validate_record(_base(segment=text or "<"))


def test_configured_tenant_names_follow_the_same_rule():
    """A tenant key's tenant labels all its traffic: an unsafe one is refused at start-up, not
    turned into records every path then refuses."""
    with pytest.raises(ValueError, match="VIGIL_TENANT_KEYS: the tenant 'a<b' holds '<'"):
        load_settings(tenant_keys={"tenant-key-0123456789": "a<b"})
    assert load_settings(tenant_keys={"tenant-key-0123456789": "acme corp"}).tenant_keys
