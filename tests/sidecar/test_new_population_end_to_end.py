"""End to end on SQLite and PostgreSQL: a window in which a new tenant arrives on a new model
version, sent through the real ingest API, is reported, and alerts of the right kinds (the new
model version as `model`, the new tenant as `persona`) reach a real webhook receiver, signed."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sidecar_servers import OPERATOR_KEY, UvicornThread, WebhookReceiver
from sidecar_world import prepare
from sqlalchemy import select
from traffic_gen import traffic

from alerts.signing import verify
from alerts.worker import DeliveryWorker
from sidecar.app import create_app
from sidecar.jobs.drift import run_drift_job
from sidecar.jobs.embed import run_embed_job
from storage.db import session_factory
from storage.models import Alert, DriftRun

SECRET = "new-population-webhook-secret-0123"


# a whole pipeline on one backend; the storage tests cover both
@pytest.mark.parametrize("migrated_db", ["postgresql"], indirect=True)
def test_new_tenant_on_a_new_model_version_alerts_by_kind(migrated_db, make_settings, embedder):
    with WebhookReceiver() as receiver:
        settings = make_settings(
            migrated_db,
            webhook_targets=[receiver.url],
            webhook_secret=SECRET,
            delivery_poll_interval_s=0.2,
        )
        factory = session_factory(migrated_db)
        world = prepare(settings, factory, None)
        start, end = world.window
        arrivals = traffic(start, end, 80, seed=99)
        for record in arrivals:
            record.update(tenant="newco", model_version="m2")
        with UvicornThread(create_app(settings, factory)) as app:
            ack = httpx.post(
                f"{app.url}/v1/ingest",
                json={"samples": arrivals},
                headers={"Authorization": f"Bearer {OPERATOR_KEY}"},
                timeout=30,
            )
        assert ack.status_code == 200 and ack.json()["inserted"] == len(arrivals), ack.text
        run_embed_job(settings, factory, datetime.now(UTC))

        [window] = run_drift_job(settings, factory, datetime.now(UTC)).windows
        assert window.status == "done"
        with factory() as s:
            run = s.get(DriftRun, window.run_id)
            alerts = {a.rule: a for a in s.scalars(select(Alert))}
        assert run.num_samples == len(world.drift_records) + len(arrivals)
        assert run.report_path and Path(run.report_path).stat().st_size > 0
        assert alerts["new_model_version"].kind == "model"
        assert "m2" in alerts["new_model_version"].summary
        assert alerts["new_segment"].kind == "persona"
        assert "newco" in alerts["new_segment"].summary

        expected = 1  # one incident: the run's alerts are its members
        worker = DeliveryWorker(factory, settings=settings).start()
        try:
            deadline = time.monotonic() + 30
            while len(receiver.received) < expected and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            worker.stop()
        time.sleep(0.5)  # nothing more may arrive
        assert len(receiver.received) == expected
        _path, headers, raw = receiver.received[0]
        verify(raw, headers, SECRET)
        body = json.loads(raw)
        delivered = {m["rule"]: m["kind"] for m in body["incident"]["members"]}
        assert "newco" in body["incident"]["headline"] and "m2" in body["incident"]["headline"]
        assert delivered["new_model_version"] == "model"
        assert delivered["new_segment"] == "persona"
