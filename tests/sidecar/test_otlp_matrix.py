"""The compatibility matrix, on SQLite and PostgreSQL: each real instrumentation package (pinned
in the dev extra) drives the official `openai` client against a stub OpenAI-compatible server,
two plain chats and one streamed, with the content capture it documents, exporting spans and
log records over OTLP/HTTP to a sidecar under uvicorn. Each chat must become one sample with its
prompt, response, token counts and model; the one known gap is asserted as such (OpenLLMetry's
events mode emits a streamed answer's `gen_ai.choice` outside its span: no span context, so the
streamed sample has no response, and the record is counted as rejected)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from instrumented_chats import DEFAULT_PROMPTS, PACKAGES
from sidecar_servers import API_KEY, UvicornThread
from sqlalchemy import select
from stub_openai import MODEL_SUFFIX, StubOpenAI, answer_of

from sidecar.app import create_app
from sidecar.otlp.join_job import run_join_job
from storage.db import session_factory
from storage.models import OtlpPending, Sample

SCRIPT = Path(__file__).parents[1] / "support" / "instrumented_chats.py"
STREAMED_WITHOUT_RESPONSE = {"openllmetry events"}


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_instrumented_openai_chats_arrive_with_their_text(package, migrated_db, make_settings):
    settings = make_settings(migrated_db, otlp_join_wait_s=60.0)
    factory = session_factory(migrated_db)
    with StubOpenAI() as stub, UvicornThread(create_app(settings, factory)) as sidecar:
        done = subprocess.run(
            [sys.executable, str(SCRIPT), package, sidecar.url, API_KEY, stub.url],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert stub.requests == 3
        rejected = sidecar_rejected(sidecar)
    # spans still waiting (a streamed answer whose choice came without span context) expire
    run_join_job(settings, factory, datetime.now(UTC) + timedelta(seconds=120))
    with factory() as s:
        assert s.scalars(select(OtlpPending)).all() == []
        samples = sorted(s.scalars(select(Sample)), key=lambda r: r.prompt or "")
    by_prompt = {row.prompt: row for row in samples}
    assert len(samples) == 3, [(r.prompt, r.response) for r in samples]
    for i, prompt in enumerate(DEFAULT_PROMPTS):
        row = by_prompt.get(prompt)
        assert row is not None, (package, sorted(by_prompt, key=str))
        streamed = i % 3 == 2
        if streamed and package in STREAMED_WITHOUT_RESPONSE:
            assert row.response is None
            assert rejected.get(("logs", "no_span_context"), 0) >= 1
        else:
            assert row.response == answer_of([{"role": "user", "content": prompt}]), package
        assert row.prompt_tokens and row.prompt_tokens > 0
        assert row.completion_tokens == len(row.response.split()) if row.response else True
        assert row.completion_tokens and row.completion_tokens > 0
        assert row.model_version == "gpt-4o-mini" + MODEL_SUFFIX
        assert row.segment == "matrix" and row.id.startswith("otel-")


def sidecar_rejected(sidecar) -> dict[tuple[str, str], int]:
    app = sidecar.server.config.app
    return app.state.otlp_tally.rejected()


# starts real OS processes: left out by make test-fast
pytestmark = pytest.mark.processes
