"""Incidents first (SQLite and PostgreSQL): the overview's first sentence is the open incident's
headline with its severity, age, alerts and who is on it, the statistics below as evidence;
`/incidents` and `/api/v1/incidents` filter by state, severity and segment; `/metrics` counts
incidents, not only alerts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from seed_incident import HEADLINE, seed_incident
from sidecar_servers import API_KEY
from test_metrics_export import scrape

from alerts import incident_lifecycle
from sidecar.app import create_app
from storage.db import session_factory
from vigil.devtools.seed_history import seed_history

AUTH = {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture
def with_incident(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    with factory() as session:
        data = seed_history(session, hours=3, samples_per_hour=20)
        incident_id = seed_incident(session, data)
    return TestClient(create_app(make_settings(migrated_db), factory)), factory, incident_id, data


def test_overview_opens_with_the_incident(with_incident):
    client, _, incident_id, _ = with_incident
    html = client.get("/", headers=AUTH).text
    first = html.split('<p class="lead" id="headline">')[1].split("</p>")[0]
    assert first == HEADLINE.replace("'", "&#39;")
    facts = html.split('id="headline-facts">')[1].split("</p>")[0]
    assert f"Incident #{incident_id}</a>: <b>high</b>, since " in facts
    assert "1 alert, not acknowledged." in facts
    # the statistics come after the incident, as evidence
    order = [html.index(f'id="{name}"') for name in ("incidents", "moved-summary", "moved")]
    assert order == sorted(order)
    assert "1</b>open incident " in html  # the high tile counts incidents; alerts in brackets


def test_incident_list_filters_and_json(with_incident):
    client, factory, incident_id, data = with_incident

    def ids(query: str) -> list[int]:
        body = client.get(f"/api/v1/incidents{query}", headers=AUTH).json()
        assert body["count"] == len(body["incidents"])
        return [i["id"] for i in body["incidents"]]

    assert ids("") == [incident_id] and ids("?severity=high") == [incident_id]
    assert ids("?severity=moderate") == [] and ids("?state=resolved") == []
    assert ids("?segment=tenant%3Dnewco") == [incident_id]  # the cause names the new tenant
    assert ids("?segment=web") == [incident_id]  # a member alert's slice
    assert ids("?segment=tenant%3Dacme") == []
    row = client.get("/api/v1/incidents", headers=AUTH).json()["incidents"][0]
    assert (row["headline"], row["state"], row["open_members"]) == (HEADLINE, "open", 1)
    with factory() as s, s.begin():
        incident_lifecycle.acknowledge(
            s, incident_id, actor="alice", now=data.now + timedelta(minutes=5)
        )
    assert ids("?state=acknowledged") == [incident_id] and ids("?state=open") == [incident_id]
    page = client.get("/incidents?state=acknowledged", headers=AUTH).text
    assert "acknowledged by alice" in page and f'href="/incidents/{incident_id}"' in page
    assert "No resolved incidents" in client.get("/incidents?state=resolved", headers=AUTH).text
    bad = client.get("/api/v1/incidents?state=sleeping", headers=AUTH)
    assert bad.status_code == 422 and "state" in bad.text
    assert client.get("/api/v1/incidents").status_code == 401


def test_metrics_count_incidents(with_incident):
    client, _, _, _ = with_incident
    v = scrape(client.get("/metrics", headers=AUTH).text)
    assert v["vigil_incidents_open{severity=high}"] == 1
    assert v["vigil_incidents_unacknowledged{severity=high}"] == 1
    assert v["vigil_incidents_open{severity=critical}"] == 0
