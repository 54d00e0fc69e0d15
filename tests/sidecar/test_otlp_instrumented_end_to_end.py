"""End to end through the official OpenAI instrumentation alone, on SQLite and PostgreSQL: a
baseline window and a drifted window of chats made with the `openai` client, instrumented by
`opentelemetry-instrumentation-openai-v2` (content as `event_only` log records), stamped at their
windows' times, exported as spans plus logs to the sidecar under uvicorn; the join buffer pairs
them, a baseline is built, validated and activated, the drift job finds the new topic, and a
signed webhook reaches a real receiver."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sidecar_servers import OPERATOR_KEY, UvicornThread, WebhookReceiver
from sidecar_world import clear_of_window_boundary, last_window
from sqlalchemy import func, select
from stub_openai import StubOpenAI
from traffic_gen import traffic

from alerts.signing import verify
from alerts.worker import DeliveryWorker
from sidecar.app import create_app
from sidecar.jobs.baselines import (
    activate_baseline,
    build_baseline_from_window,
    validate_stored_baseline,
)
from sidecar.jobs.drift import run_drift_job
from sidecar.jobs.embed import run_embed_job
from sidecar.otlp.join_job import run_join_job
from storage.db import session_factory
from storage.models import Alert, OtlpPending, Sample

SCRIPT = Path(__file__).parents[1] / "support" / "instrumented_chats.py"
SECRET = "otlp-instrumented-webhook-secret-0123"
HOUR = timedelta(hours=1)


def chat(url: str, stub: str, records: list[dict], tmp_path: Path) -> None:
    chats = tmp_path / "chats.json"
    chats.write_text(json.dumps([
        {"prompt": r["prompt"], "at": r["timestamp"]} for r in records
    ]))  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "openai-v2 event_only", url, OPERATOR_KEY, stub],
        capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "VIGIL_TEST_CHATS": str(chats)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


# a whole pipeline on one backend; the storage tests cover both
@pytest.mark.parametrize("migrated_db", ["postgresql"], indirect=True)
def test_drift_seen_only_through_the_official_instrumentation_reaches_a_signed_webhook(
    migrated_db, make_settings, embedder, tmp_path
):
    with WebhookReceiver() as receiver, StubOpenAI() as stub:
        settings = make_settings(
            migrated_db,
            webhook_targets=[receiver.url],
            webhook_secret=SECRET,
            delivery_poll_interval_s=0.2,
            eval_share=0.0,
        )
        factory = session_factory(migrated_db)
        clear_of_window_boundary(settings.drift_interval_s)
        start, end = last_window(settings.drift_interval_s)
        base_start, base_end = start - 4 * HOUR, start - HOUR
        baseline = traffic(base_start, base_end, 240, seed=7)
        drifted = traffic(start, end, 120, seed=8, new_topic_share=0.35)
        with UvicornThread(create_app(settings, factory)) as sidecar:
            chat(sidecar.url, stub.url, baseline + drifted, tmp_path)
        now = datetime.now(UTC)
        # an exporter's retry of a slow request leaves copies of log records already joined:
        # they wait out their time and go
        run_join_job(settings, factory, now + timedelta(seconds=settings.otlp_join_wait_s + 1))
        with factory() as s:
            assert s.scalar(select(func.count()).select_from(OtlpPending)) == 0
            assert s.scalar(select(func.count()).select_from(Sample)) == 360
            texted = (
                select(func.count())
                .select_from(Sample)
                .where(Sample.prompt.is_not(None), Sample.response.like("Answer to:%"))
            )
            assert s.scalar(texted) == 360
        run_embed_job(settings, factory, now)
        built = build_baseline_from_window(
            settings, factory, base_start, base_end, name="otel", now=now
        )
        checked = validate_stored_baseline(settings, factory, built.baseline_id, now=now)
        assert checked.valid, checked.reasons
        activate_baseline(factory, built.baseline_id, now=now)
        [run] = run_drift_job(settings, factory, datetime.now(UTC)).windows
        assert run.status == "done" and run.num_samples == 120
        with factory() as s:
            rules = {(a.rule, a.segment) for a in s.scalars(select(Alert))}
        assert ("prompt_embedding_mmd", "*") in rules, sorted(rules)
        worker = DeliveryWorker(factory, settings=settings).start()
        try:
            deadline = time.monotonic() + 30
            while not receiver.received and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            worker.stop()
        assert receiver.received
        for _path, headers, raw in receiver.received:
            verify(raw, headers, SECRET)
        assert any("prompt_embedding" in raw.decode() for _p, _h, raw in receiver.received)


# starts real OS processes: left out by make test-fast
pytestmark = pytest.mark.processes
