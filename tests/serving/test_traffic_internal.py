"""Requests marked `X-Vigil-Internal` (the judge, canaries) are served but never logged as
traffic: the header is read, the logger skips them before the sampler, and through the real
server only the unmarked request becomes a stored sample."""

from __future__ import annotations

import time

import httpx
import openai
from sqlalchemy import select
from test_server_support import (
    API_KEY,
    OPERATOR_KEY,
    ServerThread,
    make_settings,
    shared_engine,
    wait_for,
)
from test_traffic_record import _ListSink, _output

from serving.server.service.app import create_app
from serving.traffic.logger import FinishedRequest, TrafficLogger
from serving.traffic.sampler import TrafficSampler
from serving.traffic.segments import segment_from_request
from sidecar.evals.judge import Judge
from storage.db import session_scope
from storage.models import Sample
from storage.writer import SampleWriter
from vigil.internal import INTERNAL_HEADER


def test_the_header_marks_a_request_internal_in_any_case():
    assert segment_from_request({"x-vigil-internal": "judge"}).internal == "judge"
    assert segment_from_request({"X-VIGIL-INTERNAL": " canary "}).internal == "canary"
    assert segment_from_request({INTERNAL_HEADER: ""}).internal == "unspecified"
    assert segment_from_request({INTERNAL_HEADER: "x" * 500}).internal == "x" * 64
    assert segment_from_request({"x-vigil-tenant": "acme"}).internal is None


def test_the_logger_skips_internal_requests_before_the_quota():
    sink = _ListSink()
    sampler = TrafficSampler(0.0, 1)  # one request per hour and segment: the quota is the test
    logger = TrafficLogger(sampler, sink, model_version="mv")
    logger.log(FinishedRequest(_output(), segment_from_request({INTERNAL_HEADER: "judge"})))
    logger.log(FinishedRequest(_output(prompt="real user"), segment_from_request({})))
    assert logger.close(timeout=10)
    assert [r["prompt"] for r in sink.records] == ["real user"]  # the quota was still free
    assert logger.counters.internal == 1 and logger.counters.seen == 1


def _logged(url: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(url + "/metrics").text
    return next(
        s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "vigil:samples_logged_total"
    )


def test_marked_requests_through_the_real_server_store_no_sample(migrated_db, tmp_path):
    settings = make_settings(database_url=migrated_db, sample_rate=1.0)
    writer = SampleWriter(migrated_db, tmp_path / "journal", flush_interval_s=0.05)
    app = create_app(settings, engine=shared_engine(), writer=writer, sampler_seed=0)
    with ServerThread(app) as server:
        operator = openai.OpenAI(base_url=server.url + "/v1", api_key=OPERATOR_KEY, max_retries=0)
        operator.completions.create(
            model=settings.model_name,
            prompt="internal probe",
            max_tokens=2,
            temperature=0,
            extra_headers={INTERNAL_HEADER: "test"},
        )
        judge = Judge(server.url, settings.model_name, api_key=OPERATOR_KEY)
        try:
            judge.judge("What is 2 + 2?", "4")  # the judge marks its own calls
        finally:
            judge.close()
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0)
        # a global key's mark is ignored: its traffic cannot hide from the monitor
        client.completions.create(
            model=settings.model_name,
            prompt="a global key hides",
            max_tokens=2,
            temperature=0,
            extra_headers={INTERNAL_HEADER: "canary"},
        )
        client.completions.create(
            model=settings.model_name, prompt="a user asks", max_tokens=2, temperature=0
        )
        assert wait_for(lambda: _logged(server.url) == 2, timeout=15)
        time.sleep(0.3)  # a wrongly logged marked request would have landed by now too
        assert _logged(server.url) == 2
    assert writer.close(timeout=10)
    with session_scope(migrated_db) as s:
        prompts = set(s.scalars(select(Sample.prompt)))
    assert prompts == {"a global key hides", "a user asks"}
