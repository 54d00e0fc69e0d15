"""30 days of hourly runs in a chart: one point per 6-hour bucket, and a one-hour spike still
shows, with its run behind the click (SQLite and PostgreSQL)."""

from __future__ import annotations

import math

import pytest
from fastapi.testclient import TestClient
from sidecar_servers import API_KEY
from sqlalchemy import update

from sidecar.app import create_app
from storage.db import session_factory
from storage.models import DriftResult, DriftRun
from vigil.devtools.seed_history import seed_history

AUTH = {"Authorization": f"Bearer {API_KEY}"}
HOURS = 30 * 24
BUCKET_S = 6 * 3600


def _spike(session, run_id: int, test: str, segment: str, **values) -> float:
    session.execute(
        update(DriftResult)
        .where(
            DriftResult.run_id == run_id, DriftResult.test == test, DriftResult.segment == segment
        )
        .values(**values)
    )
    end = session.get(DriftRun, run_id).window_end.timestamp()
    return end // BUCKET_S * BUCKET_S


def test_a_month_is_bounded_and_keeps_its_spikes(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    with factory() as s:
        data = seed_history(s, hours=HOURS, samples_per_hour=1)
        psi_run, ks_run = data.run_ids[300], data.run_ids[455]
        psi_at = _spike(s, psi_run, "psi", "api", statistic=7.5)  # one hour, not flagged drifted
        ks_at = _spike(s, ks_run, "ks", "*", p_value=1e-30)
        s.commit()
    client = TestClient(create_app(make_settings(migrated_db), factory))
    body = client.get("/api/v1/series?kind=drift&range=30d", headers=AUTH).json()
    assert body["bucket_s"] == BUCKET_S
    for chart in body["charts"]:
        assert (
            len(chart["x"]) <= math.ceil(HOURS * 3600 / BUCKET_S) + 1
        )  # 720 runs, 121 points at most
        assert len(chart["runs"]) == len(chart["threshold"]) == len(chart["x"])
        assert all(len(series["values"]) == len(chart["x"]) for series in chart["series"])
    charts = {c["id"]: c for c in body["charts"]}
    psi = charts["psi:prompt_tokens"]
    api = next(series["values"] for series in psi["series"] if series["label"] == "api")
    at = psi["x"].index(psi_at)
    assert max(v for v in api if v is not None) == api[at] == pytest.approx(7.5)
    assert (
        psi["runs"][at] == psi_run
    )  # the click opens the spike's run, not another run of its bucket
    ks = charts["ks:latency_ms"]
    at = ks["x"].index(ks_at)
    assert ks["series"][0]["label"] == "all" and ks["series"][0]["values"][at] == pytest.approx(
        30.0
    )
    assert ks["runs"][at] == ks_run
    # the last bucket still leads with the drifted run
    assert psi["drifted"] and psi["runs"][-1] == data.drift_run_id
