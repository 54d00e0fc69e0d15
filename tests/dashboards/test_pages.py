"""Drill-down pages over real HTTP: /alerts lists alerts and dead-letter deliveries, /alerts/{id}
shows evidence, deliveries and a link to the report; unknown ids are 404 (SQLite and PostgreSQL)."""

from __future__ import annotations

import httpx
from page_world import seed_alert
from sidecar_servers import API_KEY, UvicornThread

from sidecar.app import create_app
from storage.db import session_factory


def test_alert_pages_show_evidence_and_dead_letters(migrated_db, make_settings, tmp_path):
    factory = session_factory(migrated_db)
    report = tmp_path / "r.html"
    report.write_text("<html><body>report</body></html>")
    seeded = seed_alert(
        factory,
        report_path=report,
        dead_delivery={
            "target": "http://127.0.0.1:9/hook", "format": "generic",
            "idempotency_key": "idem-1", "last_error": "connection refused",
        },
        rule="prompt_embedding_mmd",
        summary="mmd <b>drift</b>",
        evidence={"results": [{"test": "mmd", "p_value": 0.001}]},
    )  # fmt: skip
    alert_id, run_id = seeded.alert_id, seeded.run_id
    with (
        UvicornThread(create_app(make_settings(migrated_db), factory)) as app,
        httpx.Client(headers={"Authorization": f"Bearer {API_KEY}"}) as client,
    ):  # pages need a key
        listing = client.get(f"{app.url}/alerts").text
        assert "prompt_embedding_mmd" in listing and "connection refused" in listing
        assert "127.0.0.1:9/hook" not in listing and "http://127.0.0.1:9" in listing  # origin only
        assert "mmd &lt;b&gt;drift&lt;/b&gt;" in listing  # escaped, never raw HTML from data
        page = client.get(f"{app.url}/alerts/{alert_id}").text
        assert (
            "p_value" in page
            and "0.001" in page
            and f'href="/reports/{run_id}"' in page
            and "dead" in page
        )
        assert client.get(f"{app.url}/reports/{run_id}").text == report.read_text()
        assert client.get(f"{app.url}/alerts/424242").status_code == 404
        assert f'href="/reports/{run_id}"' in client.get(f"{app.url}/reports").text


def test_database_outage_is_503_not_500(make_settings):
    from sidecar_servers import API_KEY, free_port

    down = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/test"  # nobody listens there
    with UvicornThread(create_app(make_settings(down), session_factory(down))) as app:
        health = httpx.get(f"{app.url}/health")
        assert health.status_code == 503 and health.json()["database"] is False
        r = httpx.post(f"{app.url}/v1/ingest", json={"samples": [{"id": "x", "prompt": "p"}]},
                       headers={"Authorization": f"Bearer {API_KEY}"})  # fmt: skip
        assert r.status_code == 503 and "retry" in r.json()["detail"]
        assert r.headers["Retry-After"] == "5"
