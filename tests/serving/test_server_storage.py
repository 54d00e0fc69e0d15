"""Sampled traffic lands in SQLite and PostgreSQL through storage's SampleWriter: correct token
counts and timings, segment identity, quotas per segment, PII redacted before storage."""

from __future__ import annotations

import time

import httpx
import openai
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select
from test_server_support import (
    OPERATOR_KEY,
    ServerThread,
    make_settings,
    shared_engine,
    wait_for,
)

from serving.server.base.auth import hash_user
from serving.server.service.app import create_app
from serving.traffic.redact import redact_pii
from storage.db import session_scope
from storage.models import Sample
from storage.writer import SampleWriter
from vigil.record_redaction import RecordRedaction


def _rows(url: str) -> list[Sample]:
    with session_scope(url) as s:
        rows = list(s.scalars(select(Sample).order_by(Sample.timestamp)))
        s.expunge_all()
        return rows


def _serve(url: str, tmp_path, **overrides):
    # the test client stands in for the operator's gateway: its x-vigil-* headers are trusted
    settings = make_settings(database_url=url, **{"trusted_proxies": ["127.0.0.1/32"], **overrides})
    writer = SampleWriter(url, tmp_path / "journal", flush_interval_s=0.05,
                          redaction=RecordRedaction.from_settings(settings))  # fmt: skip
    app = create_app(settings, engine=shared_engine(), writer=writer, sampler_seed=0)
    return settings, writer, ServerThread(app)


def test_sampled_rows_carry_the_request_statistics(migrated_db, tmp_path):
    settings, writer, server = _serve(
        migrated_db, tmp_path, sample_rate=1.0, redact_pii=True, model_version="smollm2-test-v1"
    )
    # PII to redact, and a NUL that PostgreSQL text cannot hold (stored as U+FFFD, not lost)
    secret = "Email jane.doe@example.com or call +1 (415) 555-0199 about order 42.\x00"
    t0 = time.time()
    with server:
        # the gateway's operator key: its metadata segment counts
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=OPERATOR_KEY, max_retries=0)
        chat = client.chat.completions.create(
            model=settings.model_name,
            max_tokens=4,
            temperature=0.7,
            seed=3,
            n=2,
            messages=[{"role": "user", "content": secret}],
            tools=[
                {
                    "type": "function",
                    "function": {"name": "lookup_order", "parameters": {"type": "object"}},
                }
            ],
            user="user-17",
            metadata={"segment": "support", "channel": "web"},
            extra_headers={"x-vigil-tenant": "acme", "x-vigil-prompt-version": "pv3"},
        )
        streamed = list(
            client.completions.create(
                model=settings.model_name,
                prompt="The capital of France is",
                max_tokens=3,
                temperature=0,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        usage = streamed[-1].usage

        def logged() -> float:
            text = httpx.get(server.url + "/metrics").text
            return next(
                s.value
                for f in text_string_to_metric_families(text)
                for s in f.samples
                if s.name == "vigil:samples_logged_total"
            )

        assert wait_for(lambda: logged() == 3, timeout=15)  # the writer committed all three
    t1 = time.time()
    assert writer.close(timeout=10)
    rows = _rows(migrated_db)
    assert len(rows) == 3  # one row per generated choice: 2 (chat, n=2) + 1 (completion)
    chat_rows = [r for r in rows if r.segment == "support"]
    assert len(chat_rows) == 2
    for row in chat_rows:
        assert (row.tenant, row.prompt_version, row.model_version) == (
            "acme",
            "pv3",
            "smollm2-test-v1",
        )
        assert row.tools == ["lookup_order"] and row.sample_weight == 1.0 and row.source == "engine"
        assert row.prompt_tokens == chat.usage.prompt_tokens
        assert "jane.doe@example.com" not in row.prompt and "555-0199" not in row.prompt
        assert "[EMAIL]" in row.prompt and "[PHONE]" in row.prompt and "order 42" in row.prompt
        assert "\x00" not in row.prompt and "\ufffd" in row.prompt
        assert row.extra["user"] == hash_user("user-17", settings.secret_key) and row.extra[
            "metadata"
        ] == {"channel": "web"}
    assert sum(r.completion_tokens for r in chat_rows) == chat.usage.completion_tokens
    assert sorted(r.response for r in chat_rows) == sorted(
        redact_pii(c.message.content) for c in chat.choices
    )
    (plain,) = [r for r in rows if r.segment is None]
    assert plain.tenant is None and plain.tools == []
    assert plain.prompt == "The capital of France is"
    assert (
        plain.prompt_tokens == usage.prompt_tokens
        and plain.completion_tokens == usage.completion_tokens
    )
    assert plain.response == "".join(c.choices[0].text for c in streamed if c.choices)
    wall_ms = (t1 - t0) * 1000
    for row in rows:
        assert 0 <= row.queue_ms <= row.ttft_ms <= row.latency_ms <= wall_ms
        assert row.tpot_ms is None or 0 < row.tpot_ms <= row.latency_ms
        assert row.finish_reason in ("stop", "length")
        assert row.mean_logprob <= 0 and row.mean_entropy >= 0
        assert t0 - 1 <= row.timestamp.timestamp() <= t1 + 1


def test_segment_quotas_hold_without_a_base_rate(migrated_db, tmp_path):
    settings, writer, server = _serve(
        migrated_db, tmp_path, sample_rate=0.0, segment_min_per_hour=2
    )
    with server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=OPERATOR_KEY, max_retries=0)

        def ask(**kw):
            client.completions.create(model=settings.model_name, prompt="Hi", max_tokens=1, **kw)

        for _ in range(4):
            ask(extra_headers={"x-vigil-tenant": "big"})
        ask(extra_body={"metadata": {"tenant": "small"}})
        ask(user="u-1")
    assert writer.close(timeout=10)
    rows = _rows(migrated_db)
    by_tenant: dict[str, int] = {}
    for row in rows:
        by_tenant[row.tenant] = by_tenant.get(row.tenant, 0) + 1
        assert row.sample_weight == 1.0  # quota rows are certain inclusions
    assert {k: v for k, v in by_tenant.items() if k != "big"} == {
        "small": 1,
        hash_user("u-1", settings.secret_key): 1,
    }
    hours = {int(r.timestamp.timestamp() // 3600) for r in rows}
    if len(hours) == 1:
        assert by_tenant["big"] == 2
    else:  # the test straddled the top of the hour, where the quota resets
        assert 2 <= by_tenant["big"] <= 4
