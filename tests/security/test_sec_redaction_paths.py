"""With `VIGIL_REDACT_PII=true` every way a sample is stored goes through the one redaction
step (vigil.record_redaction): `POST /v1/ingest`, OTLP spans, the proxy's and the engine's
traffic. No stored row keeps an e-mail address or phone number, in its texts, its unknown
fields or its `user`, which is kept as a keyed pseudonym."""

from __future__ import annotations

import json
import time

import httpx
from fake_upstream import FakeUpstream
from otlp_support import export_protobuf, make_spans, semconv_chat_attributes
from sidecar_servers import API_KEY, UvicornThread
from sqlalchemy import select

from serving.outputs import CompletionOutput, RequestMetrics, RequestOutput
from serving.proxy.main import build_proxy
from serving.traffic.logger import FinishedRequest, TrafficLogger
from serving.traffic.sampler import TrafficSampler
from serving.traffic.segments import segment_from_request
from sidecar.app import create_app
from storage.db import session_factory
from storage.journal import Journal
from storage.models import Sample
from storage.writer import SampleWriter
from vigil.pseudonym import hash_user

EMAIL = "jane.doe@example.com"
PHONE = "+1 (415) 555-0199"
TEXT = f"mail {EMAIL} or call {PHONE}"
AUTH = {"Authorization": f"Bearer {API_KEY}"}


def _engine_output() -> RequestOutput:
    metrics = RequestMetrics(arrival_time=1.0, first_scheduled_time=1.1, first_token_time=1.2,
                             last_token_time=1.5, finished_time=1.5)  # fmt: skip
    choice = CompletionOutput(
        index=0, text=TEXT, delta="", token_ids=[1, 2, 3], finish_reason="stop",
        mean_logprob=-1.0, mean_entropy=1.0,
    )  # fmt: skip
    return RequestOutput("req-engine", TEXT, [1, 2, 3, 4], [choice], True, metrics)


def test_every_write_path_stores_redacted_rows(migrated_db, make_settings, tmp_path):
    upstream = FakeUpstream()
    with UvicornThread(upstream.app) as up:
        settings = make_settings(
            migrated_db, redact_pii=True, sample_rate=1.0, proxy_upstream_url=up.url
        )
        factory = session_factory(migrated_db)
        with UvicornThread(create_app(settings, factory)) as sidecar:  # ingest and OTLP
            sample = {"id": "ingest-1", "prompt": TEXT, "response": TEXT, "user": EMAIL,
                      "metadata": {"contact": TEXT}, "note": [TEXT]}  # fmt: skip
            posted = httpx.post(f"{sidecar.url}/v1/ingest", json={"samples": [sample]},
                                headers=AUTH)  # fmt: skip
            assert posted.status_code == 200, posted.text
            spans = make_spans([("chat", semconv_chat_attributes(1, prompt=TEXT, answer=TEXT))])
            assert export_protobuf(sidecar.url, API_KEY, spans).name == "SUCCESS"

        writer = SampleWriter.from_settings(settings)  # the engine's traffic
        logger = TrafficLogger(TrafficSampler(1.0, 0), writer, model_version="mv")
        logger.log(FinishedRequest(_engine_output(), segment_from_request(
            {}, user=EMAIL, metadata={"contact": TEXT})))  # fmt: skip
        assert logger.close(timeout=10) and writer.close()

        writer = SampleWriter.from_settings(settings)  # the proxy's traffic
        with UvicornThread(build_proxy(settings, writer=writer, sampler_seed=0)) as proxy:
            chat = {"model": "m", "user": EMAIL, "metadata": {"contact": TEXT},
                    "messages": [{"role": "user", "content": TEXT}]}  # fmt: skip
            answer = httpx.post(f"{proxy.url}/v1/chat/completions", json=chat, headers=AUTH)
            assert answer.status_code == 200, answer.text
            deadline = time.monotonic() + 10
            while writer.stats()["written"] < 1 and time.monotonic() < deadline:
                writer.flush(timeout=1)  # the proxy's logger hands the record over off-thread
        assert writer.close()

    with factory() as s:
        rows = list(s.scalars(select(Sample)))
    assert len(rows) == 4, [(r.id, r.source) for r in rows]
    for row in rows:
        stored = json.dumps([row.prompt, row.response, row.extra])
        assert EMAIL not in stored and "555-0199" not in stored and "jane" not in stored, stored
        assert "[EMAIL]" in row.prompt and "[PHONE]" in row.prompt, row.prompt
        user = (row.extra or {}).get("user")
        assert user is None or user.startswith("u-"), user
    by_id = {r.id: r for r in rows}
    assert by_id["ingest-1"].extra["user"] == hash_user(EMAIL, settings.secret_key)
    assert by_id["ingest-1"].extra["metadata"] == {"contact": "mail [EMAIL] or call [PHONE]"}


def test_a_journal_left_unredacted_is_redacted_on_replay(migrated_db, make_settings):
    """A journal an older writer spilled holds records as sent: replay applies the step too."""
    settings = make_settings(migrated_db, redact_pii=True)
    journal = Journal(settings.journal_dir)
    journal.append([{"id": "old-1", "prompt": TEXT, "user": EMAIL, "timestamp": time.time()}])
    journal.close()
    writer = SampleWriter.from_settings(settings)
    deadline = time.monotonic() + 10
    while writer.replayed < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert writer.close()
    with session_factory(migrated_db)() as s:
        row = s.get(Sample, "old-1")
    assert row.prompt == "mail [EMAIL] or call [PHONE]"
    assert row.extra == {"user": hash_user(EMAIL, settings.secret_key)}
