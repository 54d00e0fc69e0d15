"""The caller's per-sample rules on OTLP spans, checked for a whole batch at once: a span they
refuse (too old for a global key) is rejected alone with its reason, whichever place it holds
in the batch, and the others are stored; text is stored as sent when it is plain, and with
NUL characters and lone surrogates replaced when not."""

from __future__ import annotations

import httpx
import pytest
from otlp_support import make_spans, otlp_json, semconv_chat_attributes
from sidecar_servers import API_KEY, OPERATOR_KEY, UvicornThread
from sqlalchemy import select

from sidecar.app import create_app
from storage.db import session_factory
from storage.models import Sample


@pytest.fixture
def server(migrated_db, make_settings):
    settings = make_settings(migrated_db)
    factory = session_factory(migrated_db)
    with UvicornThread(create_app(settings, factory)) as srv:
        srv.factory = factory
        yield srv


def post(server, key: str, document: dict) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/traces",
        json=document,
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )


def stored_tokens(server) -> list[int]:
    with server.factory() as s:
        return sorted(s.scalars(select(Sample.prompt_tokens)))


def backdate(document: dict, positions: set[int], hours: float) -> None:
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    for i in positions:
        shift = int(hours * 3600 * 1e9)
        for key in ("startTimeUnixNano", "endTimeUnixNano"):
            spans[i][key] = str(int(spans[i][key]) - shift)


@pytest.mark.parametrize("old", [{0}, {2}, {4}, {1, 3}])
def test_a_span_the_rules_refuse_is_rejected_alone_wherever_it_is(server, old):
    spans = make_spans([("chat", semconv_chat_attributes(i)) for i in range(5)])
    document = otlp_json(spans)
    backdate(document, old, hours=5)  # past VIGIL_MAX_PAST_SKEW_S (2 h) for a global key
    r = post(server, API_KEY, document)
    assert r.status_code == 200, r.text
    partial = r.json()["partialSuccess"]
    assert int(partial["rejectedSpans"]) == len(old)
    assert "in the past" in partial["errorMessage"] and "samples[" not in partial["errorMessage"]
    assert stored_tokens(server) == [20 + i for i in range(5) if i not in old]


def test_an_operator_key_may_backfill_the_same_batch(server):
    document = otlp_json(make_spans([("chat", semconv_chat_attributes(i)) for i in range(3)]))
    backdate(document, {0, 1, 2}, hours=5)
    r = post(server, OPERATOR_KEY, document)
    assert r.status_code == 200 and not r.json().get("partialSuccess")
    assert stored_tokens(server) == [20, 21, 22]


def test_text_is_stored_as_sent_or_with_unstorable_characters_replaced(server):
    texts = ["plain words", "naïve café ☕", "nul\x00inside", "lone \ud800 surrogate"]
    spans = make_spans(
        [("chat", semconv_chat_attributes(i, prompt=t)) for i, t in enumerate(texts)]
    )
    document = otlp_json(spans)
    r = post(server, API_KEY, document)
    assert r.status_code == 200 and not r.json().get("partialSuccess"), r.text
    with server.factory() as s:
        prompts = [p for p in s.scalars(select(Sample.prompt).order_by(Sample.prompt_tokens))]
    assert [p.removeprefix("Be brief.\n") for p in prompts] == [
        "plain words",
        "naïve café ☕",
        "nul\ufffdinside",
        "lone ? surrogate",
    ]
