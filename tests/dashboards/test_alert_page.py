"""The alert page (lead sentence, signal chart, examples, timeline, evidence toggle) and the
on-call actions by form and by API, admin key only (SQLite and PostgreSQL)."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sidecar_servers import API_KEY

from sidecar.app import create_app
from storage.db import session_factory
from storage.models import Alert, AlertAction, DriftResult, DriftRun, Embedding, Sample
from storage.records import vector_to_bytes
from vigil.devtools.seed_history import seed_history

ADMIN = "admin-key-0123456789abcdef"
VIEW = {"Authorization": f"Bearer {API_KEY}"}
ADMIN_AUTH = {"Authorization": f"Bearer {ADMIN}"}


@pytest.fixture
def world(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    with factory() as session:
        seeded = seed_history(session, hours=6)
    client = TestClient(create_app(make_settings(migrated_db, admin_keys=[ADMIN]), factory))
    return seeded, client, factory


def test_alert_page_leads_with_what_moved(world):
    data, client, _ = world
    page = client.get(f"/alerts/{data.alert_id}", headers=VIEW)
    assert page.status_code == 200
    html = page.text
    words = html.split('id="lead">')[1].split("</p>")[0]
    assert words.startswith("The distribution of prompt length changed for segment web since ")
    assert (
        "psi on prompt_tokens for segment web rose to 0.9 against a calibrated threshold"
        " of 0.2 (4.5×)" in html.split('id="evidence-lead"')[1].split("</p>")[0]
    )
    assert (
        'data-series="/api/v1/series?kind=drift&amp;range=7d&amp;test=psi&amp;feature=prompt_tokens&amp;segment=web"'
        in html
    )
    assert (
        "<details><summary>Evidence (JSON)</summary>" in html and "&#34;statistic&#34;: 0.9" in html
    )
    assert "opened (high)" in html
    assert client.get("/alerts/424242", headers=VIEW).status_code == 404


def test_actions_need_an_admin_and_land_in_the_timeline(world):
    data, client, factory = world
    url = f"/api/v1/alerts/{data.alert_id}"
    assert client.post(f"{url}/acknowledge", json={}, headers=VIEW).status_code == 403
    assert client.post(f"{url}/acknowledge", json={}).status_code == 401
    r = client.post(f"{url}/acknowledge", json={"note": "on it"}, headers=ADMIN_AUTH)
    assert r.status_code == 200 and r.json()["acknowledged_by"].startswith("key:")
    r = client.post(
        f"/alerts/{data.alert_id}/snooze",
        data={"hours": "4"},
        headers=ADMIN_AUTH,
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"] == f"/alerts/{data.alert_id}"
    html = client.get(f"/alerts/{data.alert_id}", headers=VIEW).text
    timeline = html.split('id="timeline"')[1].split("</table>")[0]
    assert "acknowledge" in timeline and "on it" in timeline and "snooze until" in timeline
    r = client.post(f"{url}/resolve", json={"note": "prompt v7 rolled back"}, headers=ADMIN_AUTH)
    assert r.status_code == 200 and r.json()["status"] == "resolved"
    assert client.post(f"{url}/acknowledge", json={}, headers=ADMIN_AUTH).status_code == 409
    assert client.post(f"{url}/explode", json={}, headers=ADMIN_AUTH).status_code == 404
    assert (
        client.post("/api/v1/alerts/999999/acknowledge", json={}, headers=ADMIN_AUTH).status_code
        == 404
    )
    with factory() as s:
        assert [a.action for a in s.query(AlertAction).order_by(AlertAction.id)] == [
            "acknowledge",
            "snooze",
            "resolve",
        ]
        assert s.get(Alert, data.alert_id).status == "resolved"


def test_embedding_alert_shows_example_prompts(world):
    data, client, factory = world
    with factory() as s:
        run = s.get(DriftRun, data.drift_run_id)
        ids = [
            sid
            for (sid,) in s.query(Sample.id)
            .filter(Sample.timestamp >= run.window_start, Sample.timestamp < run.window_end)
            .order_by(Sample.timestamp, Sample.id)
        ]
        for i, sid in enumerate(ids):
            blob, dim = vector_to_bytes(np.full(4, float(i), dtype=np.float32))
            s.add(Embedding(sample_id=sid, field="prompt", model="m", dim=dim, vector=blob))
        s.add(
            DriftResult(
                run_id=run.id,
                test="new_cluster",
                feature="prompt_embedding",
                segment="*",
                statistic=0.3,
                threshold=0.05,
                drifted=True,
                insufficient=False,
                detail={"clusters": [{"size": 2, "share": 0.3, "representatives": [0, 1]}]},
            )
        )
        alert = Alert(
            dedupe_key="nc",
            rule="prompt_new_cluster",
            kind="prompt",
            severity="high",
            segment="*",
            status="open",
            summary="new cluster",
            run_id=run.id,
            evidence={
                "results": [
                    {
                        "test": "new_cluster",
                        "feature": "prompt_embedding",
                        "segment": "*",
                        "drifted": True,
                    }
                ]
            },  # fmt: skip
            first_seen=data.now,
            last_seen=data.now,
        )
        s.add(alert)
        s.commit()
        expected = [s.get(Sample, sid).prompt for sid in ids[:2]]
        alert_id = alert.id
    html = client.get(f"/alerts/{alert_id}", headers=VIEW).text
    examples = html.split('id="examples">')[1].split("</ol>")[0]
    assert all(f"<li>{p}</li>" in examples for p in expected)


BODIES = st.one_of(
    st.binary(max_size=200),
    st.dictionaries(
        st.sampled_from(["note", "until", "hours", "x"]),
        st.one_of(st.text(max_size=40), st.integers(), st.floats(), st.none(), st.booleans()),
    ).map(lambda d: __import__("json").dumps(d).encode()),
)


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=BODIES, action=st.sampled_from(["snooze", "acknowledge"]), as_json=st.booleans())
def test_any_action_body_is_answered_without_a_server_error(world, body, action, as_json):
    data, client, _ = world
    kind = "application/json" if as_json else "application/x-www-form-urlencoded"
    r = client.post(
        f"/api/v1/alerts/{data.alert_id}/{action}",
        content=body,
        headers={**ADMIN_AUTH, "Content-Type": kind},
    )
    assert r.status_code < 500, (body, r.status_code, r.text)
