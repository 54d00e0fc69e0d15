"""End to end on SQLite and PostgreSQL: recorded samples written through storage → embed job →
evaluate job (judge = a small real HTTP server on 127.0.0.1 speaking /v1/chat/completions with
logprobs, see sidecar_servers.JudgeEngine) → drift job → a real webhook receiver on 127.0.0.1
gets signed alerts that the test verifies; the report and the pages are served by the app."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import httpx
import pytest
from sidecar_servers import API_KEY, JudgeEngine, UvicornThread, WebhookReceiver
from sidecar_world import prepare
from sqlalchemy import func, select

from alerts.signing import IDEMPOTENCY_HEADER, verify
from alerts.worker import DeliveryWorker
from sidecar.app import create_app
from sidecar.jobs.drift import run_drift_job
from storage.db import session_factory
from storage.models import Alert, DriftRun, Embedding, EvalScore

SECRET = "e2e-webhook-secret-0123456789"


AUTH = {"Authorization": f"Bearer {API_KEY}"}  # every sidecar page needs a key


def open_in_chromium(url: str) -> list[str]:
    """Console errors and page errors of `url` in headless Chromium."""
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        page = browser.new_page(extra_http_headers=AUTH)
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on(
            "response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None
        )
        page.goto(url, wait_until="load")
        page.wait_for_timeout(1500)  # let Evidently's bundle render its widgets
        assert "Vigil drift report" in page.content()
        browser.close()
    return errors


# a whole pipeline on one backend; the storage tests cover both
@pytest.mark.parametrize("migrated_db", ["postgresql"], indirect=True)
def test_pipeline_delivers_signed_alerts_and_a_report(migrated_db, make_settings, embedder):
    with JudgeEngine() as engine, WebhookReceiver() as receiver:
        settings = make_settings(
            migrated_db, eval_share=1.0, webhook_targets=[receiver.url], webhook_secret=SECRET,
            engine_url=engine.url, delivery_poll_interval_s=0.2,
        )  # fmt: skip
        factory = session_factory(migrated_db)
        world = prepare(settings, factory, engine.url)
        n_samples = len(world.baseline_records) + len(world.drift_records)
        with factory() as s:
            assert s.scalar(select(func.count()).select_from(Embedding)) == 2 * n_samples
            judge_rows = s.scalars(select(EvalScore).where(EvalScore.name == "judge")).all()
        assert world.judged == n_samples == len(judge_rows)
        # G-Eval oracle: the fake engine's distribution for on-topic answers, renormalised
        on_topic = {"5": 0.6, "4": 0.3, "3": 0.05}
        expected = sum(int(d) * p for d, p in on_topic.items()) / sum(on_topic.values())
        baseline_ids = {r["id"] for r in world.baseline_records}
        scores = [r.score for r in judge_rows if r.sample_id in baseline_ids]
        assert min(scores) == pytest.approx(expected) and max(scores) == pytest.approx(expected)

        outcome = run_drift_job(settings, factory, datetime.now(UTC)).windows
        assert [o.status for o in outcome] == ["done"]
        run = outcome[0]
        assert (run.window_start, run.window_end) == world.window
        assert run.num_samples == len(world.drift_records)
        with factory() as s:
            alerts = list(s.scalars(select(Alert)))
        rules = {(a.rule, a.segment): a for a in alerts}
        assert ("prompt_embedding_mmd", "*") in rules and ("new_cluster", "*") in rules, sorted(
            rules
        )
        assert all(a.run_id == run.run_id for a in alerts)
        assert sorted(a.id for a in alerts) == sorted(run.alerts)

        # a second run over the same time does nothing: the window is done, the cursor moved
        assert run_drift_job(settings, factory, datetime.now(UTC)).windows == []

        expected = 1  # the run's alerts are one incident: one notification
        assert {a.incident_id for a in alerts} == {alerts[0].incident_id}
        worker = DeliveryWorker(factory, settings=settings).start()
        try:
            deadline = time.monotonic() + 30
            while len(receiver.received) < expected and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(0.5)  # nothing more may arrive
        finally:
            worker.stop()
        assert len(receiver.received) == expected
        assert json.loads(receiver.received[0][2])["incident"]["size"] == len(alerts)
        keys = set()
        for _path, headers, raw in receiver.received:
            verify(raw, headers, SECRET)  # raises SignatureError if forged or stale
            body = json.loads(raw)
            keys.add(headers[IDEMPOTENCY_HEADER])
            text = json.dumps(body)
            assert "/alerts/" in text and f"/reports/{run.run_id}" in text
        assert len(keys) == expected
        with pytest.raises(Exception, match="signature"):
            verify(receiver.received[0][2] + b" ", receiver.received[0][1], SECRET)

        with UvicornThread(create_app(settings, factory)) as app:
            listing = httpx.get(f"{app.url}/reports", headers=AUTH)
            assert listing.status_code == 200 and f'href="/reports/{run.run_id}"' in listing.text
            report = httpx.get(f"{app.url}/reports/{run.run_id}", headers=AUTH)
            assert report.status_code == 200
            size = len(report.content)
            assert 100_000 < size <= 5 * 1024 * 1024
            assert "Vigil drift report" in report.text and "DataDrift" in report.text
            assert (
                "penalties for late filing" in report.text
                or "taxed under" in report.text
                or "deduct" in report.text
            )
            # no raw dump: the report holds a handful of example prompts, not the window
            assert sum(report.text.count(r["prompt"]) > 0 for r in world.drift_records) <= 60
            alert_id = rules[("prompt_embedding_mmd", "*")].id
            page = httpx.get(f"{app.url}/alerts/{alert_id}", headers=AUTH)
            assert page.status_code == 200 and "prompt_embedding" in page.text
            assert f'href="/reports/{run.run_id}"' in page.text
            assert httpx.get(f"{app.url}/alerts", headers=AUTH).status_code == 200
            assert httpx.get(f"{app.url}/reports/999999", headers=AUTH).status_code == 404
            errors = open_in_chromium(f"{app.url}/reports/{run.run_id}")
        assert errors == []
        with factory() as s:
            assert s.scalar(select(func.count()).select_from(DriftRun)) == 1
