"""/baselines: each baseline's window, size, verdict, thresholds; build/validate/activate from
the page with an admin key (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import unquote

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sidecar_servers import API_KEY

from dashboards.baseline_jobs import BaselineJobs
from dashboards.baselines_page import BaselineOps, build_baselines_router
from sidecar.app import create_app
from storage.db import session_factory
from storage.models import Baseline
from vigil.devtools.seed_history import seed_history
from vigil.keys import Principal

ADMIN = "admin-key-0123456789abcdef"


def test_page_lists_baselines_and_activates_one(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    with factory() as s:
        data = seed_history(s, hours=3)
        s.add(
            Baseline(
                name="next",
                status="validated",
                created_at=data.now,
                window_start=data.now - timedelta(days=1),
                window_end=data.now,
                num_samples=321,
                spec={"thresholds": {"ks": {"*": 0.005}}},
                validation={"valid": True, "reasons": []},
            )
        )
        s.commit()
        new_id = s.query(Baseline.id).filter(Baseline.name == "next").scalar()
    client = TestClient(create_app(make_settings(migrated_db, admin_keys=[ADMIN]), factory))
    html = client.get("/baselines", headers={"Authorization": f"Bearer {API_KEY}"}).text
    table = html.split('id="baselines"')[1].split("</table>")[0]
    assert "<b>active</b>" in table and "<b>validated</b>" in table and "321" in table
    assert "psi/* 0.2" in table and "ks/* 0.005" in table and "valid" in table
    viewer = client.post(
        "/baselines/activate",
        data={"id": str(new_id)},
        headers={"Authorization": f"Bearer {API_KEY}"},
        follow_redirects=False,
    )
    assert viewer.status_code == 403
    r = client.post(
        "/baselines/activate",
        data={"id": str(new_id)},
        headers={"Authorization": f"Bearer {ADMIN}"},
        follow_redirects=False,
    )
    assert r.status_code == 303 and unquote(r.headers["location"]).endswith(
        f"baseline {new_id} is active"
    )
    with factory() as s:
        assert s.get(Baseline, new_id).status == "active"
        assert s.get(Baseline, data.baseline_id).status == "retired"
    again = client.post(
        "/baselines/activate",
        data={"id": str(new_id)},
        headers={"Authorization": f"Bearer {ADMIN}"},
        follow_redirects=False,
    )
    assert "activate refused" in unquote(again.headers["location"])


def test_build_and_validate_go_through_the_ops(migrated_db):
    calls = []
    ops = BaselineOps(
        build=lambda start, end, now: calls.append(("build", start, end)) or 7,
        validate=lambda i, now: calls.append(("validate", i)) or (False, ["halves drift: psi"]),
        activate=lambda i, now: None,
    )
    app = FastAPI()
    jobs = BaselineJobs()
    app.include_router(
        build_baselines_router(
            session_factory(migrated_db), lambda: Principal("k", admin=True), ops, jobs=jobs
        )
    )
    client = TestClient(app)
    r = client.post(
        "/baselines/build",
        data={"start": "2026-11-28T00:00:00Z", "end": "2026-11-29T00:00:00"},
        follow_redirects=False,
    )
    assert unquote(r.headers["location"]).endswith(
        "job 1 started: build a baseline from 2026-11-28 00:00 to 2026-11-29 00:00 UTC "
        "(its state shows below)"
    )
    assert jobs.wait(1, timeout=10).outcome == "built baseline 7 (candidate)"
    assert calls[0][1].isoformat() == "2026-11-28T00:00:00+00:00" and calls[0][2].tzinfo is not None
    r = client.post("/baselines/validate", data={"id": "7"}, follow_redirects=False)
    assert "job 2 started: validate baseline 7" in unquote(r.headers["location"])
    done = jobs.wait(2, timeout=10)
    assert (done.state, done.outcome) == ("done", "baseline 7: rejected: halves drift: psi")
    table = client.get("/baselines").text.split('id="baseline-jobs"')[1].split("</table>")[0]
    assert "built baseline 7 (candidate)" in table and "halves drift: psi" in table
    assert client.post("/baselines/build", data={"start": "yesterday"}).status_code == 422
    assert client.post("/baselines/validate", data={"id": "x"}).status_code == 422
    assert client.post("/baselines/explode", data={}).status_code == 404


def test_page_shows_what_each_baseline_detects_and_the_judge_validity(migrated_db, make_settings):
    from drift.baseline.power_report import DetectableEffect, PowerReport

    effect = DetectableEffect(
        test="ks", feature="completion_tokens", kind="shift", effect=0.31, largest=3.0,
        power_at_largest=1.0, scale=40.0, mean=100.0,
    )  # fmt: skip
    power = PowerReport(window_size=300, reference_size=2500, effects=[effect]).to_dict()
    factory = session_factory(migrated_db)
    with factory() as s:
        data = seed_history(s, hours=1)
        s.add(
            Baseline(
                name="measured", status="validated", created_at=data.now,
                window_start=data.now - timedelta(days=1), window_end=data.now,
                num_samples=5000, spec={"power": power}, validation={"valid": True},
            )
        )  # fmt: skip
        s.commit()
    auth = {"Authorization": f"Bearer {API_KEY}"}
    settings = make_settings(migrated_db, judge_auc=0.734, judge_model="judge-large")
    html = TestClient(create_app(settings, factory)).get("/baselines", headers=auth).text
    assert (
        "The KS test detects a shift in response length of 0.31 sd (12.4 tokens, 12 % of the "
        "mean) or more in a window of 300 samples." in html
    )
    assert "judge (judge-large)" in html and "ROC AUC 0.73" in html
    plain = TestClient(create_app(make_settings(migrated_db), factory))
    assert "has no measured validity" in plain.get("/baselines", headers=auth).text
