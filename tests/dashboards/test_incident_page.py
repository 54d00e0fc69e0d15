"""The incident page (headline, new values, new prompt wordings, why this cause, topics, what
to check first, ranked members, timeline) and its actions, which reach every member; a viewer's
form action gets a page that names the key it needs (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient
from sidecar_servers import API_KEY
from sqlalchemy import select

from alerts.service import raise_alerts
from sidecar.app import create_app
from storage.db import session_factory
from storage.models import Alert, DriftRun, Incident

ADMIN = "admin-key-0123456789abcdef"
VIEW = {"Authorization": f"Bearer {API_KEY}"}
ADMIN_AUTH = {"Authorization": f"Bearer {ADMIN}"}
HEADLINE = "New tenant newco (mobile) and prompt version v2 are 67 % of traffic since 18:56 UTC"
CAUSE = {
    "headline": HEADLINE,
    "order": ["new_segment|*", "prompt_cluster_mix|*"],
    "new_values": [{"feature": "tenant", "value": "newco", "share": 0.67, "count": 200}],
    "topics": [
        {
            "name": "helm upgrade",
            "size": 45,
            "share": 0.22,
            "examples": ["The helm upgrade to chart 7 times out"],
        }
    ],
    "new_templates": [
        {"template": "Give a brief overview … Overview:", "share": 0.33, "count": 99}
    ],
    "why": {
        "kind": "prompt",
        "confidence": "clear",
        "supports": ["prompt templates"],
        "evidence": ["js:prompt_template"],
    },
}


def _proposal(rule, kind, severity, segment="*"):
    return {
        "rule": rule,
        "kind": kind,
        "severity": severity,
        "segment": segment,
        "summary": f"{rule} fired",
        "evidence": {"test": "x", "feature": "y"},
    }


@pytest.fixture
def world(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    settings = make_settings(migrated_db, admin_keys=[ADMIN])
    now = datetime.now(UTC)
    with factory() as s:
        run = DriftRun(
            window_start=now, window_end=now, started_at=now, status="done", num_samples=300
        )
        s.add(run)
        s.flush()
        raise_alerts(
            s,
            [
                _proposal("prompt_cluster_mix", "prompt", "high"),
                _proposal("new_segment", "persona", "review", "tenant=newco"),
            ],
            run_id=run.id,
            now=now,
            settings=settings,
            cause=CAUSE,
        )
        s.commit()
        incident_id = s.scalars(select(Incident.id)).one()
    return incident_id, TestClient(create_app(settings, factory)), factory


def test_incident_page_leads_with_the_cause(world):
    incident_id, client, factory = world
    html = client.get(f"/incidents/{incident_id}", headers=VIEW).text
    assert html.split('id="headline">')[1].split("</p>")[0] == HEADLINE
    assert (
        "newco" in html.split('id="new-values"')[1]
        and "helm upgrade" in html.split('id="topics"')[1]
    )
    assert "Give a brief overview … Overview:" in html.split('id="new-templates"')[1]
    assert "The prompts changed: prompt templates moved" in html.split('id="why"')[1]
    members = html.split('id="members"')[1].split("</table>")[0]
    assert (
        members.index("prompt_cluster_mix") < members.index("new_segment") and "(lead)" in members
    )
    steps = html.split('id="next-steps"')[1].split("</ol>")[0]
    assert steps.count("<li>") == 3 and "cluster explorer" in html
    assert client.get("/incidents/987654", headers=VIEW).status_code == 404
    with factory() as s:  # each member's page names its incident and shows its runbook
        alert_id = s.scalars(select(Alert.id).where(Alert.rule == "new_segment")).one()
    page = client.get(f"/alerts/{alert_id}", headers=VIEW).text
    assert f'href="/incidents/{incident_id}"' in page and 'id="next-steps"' in page
    assert 'href="/segments?tenant=newco"' in page


def test_incident_actions_reach_every_member(world):
    incident_id, client, factory = world
    refused = client.post(f"/incidents/{incident_id}/acknowledge", data={}, headers=VIEW)
    assert refused.status_code == 403 and "text/html" in refused.headers["content-type"]
    assert "admin key" in refused.text
    r = client.post(
        f"/incidents/{incident_id}/acknowledge",
        data={"note": "on it"},
        headers=ADMIN_AUTH,
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"] == f"/incidents/{incident_id}"
    with factory() as s:
        assert {a.acknowledged_by is not None for a in s.scalars(select(Alert))} == {True}
    html = client.get(f"/incidents/{incident_id}", headers=VIEW).text
    assert html.split('id="timeline"')[1].count("on it") == 1  # one action, recorded on each member
    r = client.post(
        f"/api/v1/incidents/{incident_id}/resolve",
        json={"note": "v2 rolled back"},
        headers=ADMIN_AUTH,
    )
    assert r.status_code == 200 and r.json()["status"] == "resolved"
    with factory() as s:
        assert {a.status for a in s.scalars(select(Alert))} == {"resolved"}
    assert (
        client.post(
            f"/api/v1/incidents/{incident_id}/resolve", json={}, headers=ADMIN_AUTH
        ).status_code
        == 409
    )


@pytest.mark.parametrize(
    ("why", "words"),
    [
        ({"kind": "unclear", "confidence": "unclear"}, "Unclear: prompts and answers both moved"),
        ({"kind": "model", "confidence": "clear"}, "The model: answers moved while the prompts"),
        ({"kind": "prompt", "confidence": "clear", "supports": ["a", "b"]}, "a, b moved"),
        ({}, None),
    ],
)
def test_every_cause_verdict_renders_in_words(why, words):
    from dashboards.templating import _env

    incident = Incident(
        id=1, headline="h", severity="high", kind="model", status="resolved", notifications=0,
        first_seen=datetime.now(UTC),
    )  # fmt: skip
    html = _env.get_template("incident.html").render(
        incident=incident, members=[], why=why, new_templates=[], inhibited_kinds=frozenset()
    )
    if words is None:
        assert 'id="why"' not in html
    else:
        assert words in html.split('id="why"')[1]
