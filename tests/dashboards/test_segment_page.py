"""/segments/{tenant}/{segment}: the slice's drift series, open alerts, traffic and latest
prompts; `-` is "any" (SQLite and PostgreSQL)."""

from __future__ import annotations

from fastapi.testclient import TestClient
from seed_history import seed_history
from sidecar_servers import API_KEY

from dashboards.segment_page import segment_href
from sidecar.app import create_app
from storage.db import session_factory
from storage.models import Alert, Sample

AUTH = {"Authorization": f"Bearer {API_KEY}"}


def test_segment_page_shows_its_slice(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    with factory() as s:
        data = seed_history(s, hours=4)
        s.add(Alert(dedupe_key="t", rule="token_psi", kind="prompt", severity="moderate", segment="segment=web",
                    status="open", summary="web moved", run_id=data.drift_run_id, evidence={},
                    first_seen=data.now, last_seen=data.now))
        s.commit()
        web_prompts = {p for (p,) in s.query(Sample.prompt).filter(Sample.segment == "web")}
    client = TestClient(create_app(make_settings(migrated_db), factory))
    html = client.get("/segments/-/web", headers=AUTH).text
    assert 'data-series="/api/v1/series?kind=drift&amp;range=7d&amp;segment=segment%3Dweb"' in html
    assert 'data-series="/api/v1/series?kind=traffic&amp;range=7d&amp;segment=web"' in html
    assert "web moved" in html.split('id="segment-alerts"')[1]
    rows = html.split('id="prompts"')[1].split("</table>")[0]
    shown = [line.split("<td>")[-1].split("</td>")[0] for line in rows.split("<tr>")[2:]]
    assert shown and set(shown) <= web_prompts
    both = client.get("/segments/acme/api?range=24h", headers=AUTH).text
    assert "tenant%3Dacme" in both and "tenant=acme&amp;segment=api" in both
    assert client.get("/segments/-/-", headers=AUTH).status_code == 404
    assert client.get("/segments/-/web?range=1y", headers=AUTH).status_code == 422
    assert client.get("/segments/-/web").status_code == 401


def test_segment_links():
    assert segment_href("segment=web") == "/segments/-/web"
    assert segment_href("tenant=a/b") == "/segments/a%2Fb/-"
    assert segment_href("*") is None and segment_href("prompt_version=v2") is None
