"""The small doors: API docs off by default (and then JSON only, nothing from a CDN), ids past
any column's range a 404 instead of a 500, browser hardening headers on pages and reports,
files holding prompts readable by their owner only, and a public /health that names no host
or process. SQLite and PostgreSQL where a database is involved."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
from datetime import UTC, datetime

import httpx
import pytest
from sec_fakes import ADMIN_KEY, API_KEY, MODEL, FakeEngine

from serving.server.base.state import Phase
from serving.server.service.app import create_app as engine_create_app
from sidecar.app import create_app as sidecar_create_app
from storage.db import session_factory
from storage.journal import Journal
from storage.models import DriftRun
from vigil.config import load_settings
from vigil.security_headers import REPORT_CSP

AUTH = {"Authorization": f"Bearer {API_KEY}"}
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
HUGE = 2**64 + 1


def _get(app, method: str, path: str, **kw) -> httpx.Response:
    async def go():
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app, client=("127.0.0.1", 4000)),
            base_url="http://test",
        ) as client:
            return await client.request(method, path, **kw)

    return asyncio.run(go())


def _engine_app(**overrides):
    app = engine_create_app(
        load_settings(
            api_keys=[API_KEY],
            model_name=MODEL,
            sample_rate=0.0,
            segment_min_per_hour=0,
            **overrides,
        ),
        engine=FakeEngine(),
        log_traffic=False,
    )
    app.state.vigil.phase = Phase.READY
    return app


@pytest.fixture
def sidecar(migrated_db, make_settings, tmp_path):
    factory = session_factory(migrated_db)
    report = tmp_path / "r.html"
    report.write_text("<html><body>report</body></html>")
    now = datetime.now(UTC)
    with factory() as s:
        run = DriftRun(
            window_start=now,
            window_end=now,
            started_at=now,
            status="done",
            num_samples=5,
            report_path=str(report),
        )
        s.add(run)
        s.commit()
        run_id = run.id

    def build(**overrides):
        settings = make_settings(
            migrated_db, api_keys=[API_KEY], admin_keys=[ADMIN_KEY], **overrides
        )
        return sidecar_create_app(settings, factory)

    build.run_id = run_id
    return build


DOCS = ("/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect")


def test_api_docs_are_off_unless_asked_for_and_never_load_a_cdn(sidecar):
    """Was: /docs, /redoc and /openapi.json public on both services, Swagger from a CDN."""
    for app in (_engine_app(), sidecar()):
        assert [_get(app, "GET", p).status_code for p in DOCS] == [404] * len(DOCS)
    for app in (_engine_app(api_docs=True), sidecar(api_docs=True)):
        schema = _get(app, "GET", "/openapi.json")
        assert schema.status_code == 200 and schema.json()["openapi"].startswith("3.")
        assert (
            _get(app, "GET", "/docs").status_code == 404
            and _get(app, "GET", "/redoc").status_code == 404
        )


@pytest.mark.parametrize("path", ["/alerts/{n}", "/clusters/{n}", "/reports/{n}"])
def test_an_id_past_any_column_is_404_not_500(sidecar, path):
    """Was: /alerts/… and /clusters/… with an id above 2^63 answered 500 (SQLite overflow)."""
    app = sidecar()
    for n in (HUGE, 2**63, 2**31, 0, -1):
        response = _get(app, "GET", path.format(n=n), headers=AUTH)
        assert response.status_code == 404, (n, response.status_code, response.text[:200])


def test_alert_actions_and_baseline_forms_with_huge_ids_are_404(sidecar):
    app = sidecar()
    api = _get(app, "POST", f"/api/v1/alerts/{HUGE}/acknowledge", headers=ADMIN, json={})
    form = _get(
        app,
        "POST",
        f"/alerts/{HUGE}/acknowledge",
        headers={**ADMIN, "Sec-Fetch-Site": "same-origin"},
        data={"note": "x"},
    )
    baseline = _get(
        app,
        "POST",
        "/baselines/validate",
        headers={**ADMIN, "Sec-Fetch-Site": "same-origin"},
        data={"id": str(HUGE)},
    )
    assert (api.status_code, form.status_code, baseline.status_code) == (404, 404, 404)


def test_pages_and_reports_carry_csp_nosniff_and_referrer_policy(sidecar):
    """Was: a report was served without CSP or nosniff."""
    app = sidecar()
    for path in ("/", "/reports", "/alerts", "/login", f"/reports/{sidecar.run_id}", "/health"):
        response = _get(app, "GET", path, headers=AUTH)
        assert response.status_code == 200, path
        assert response.headers["x-content-type-options"] == "nosniff", path
        assert response.headers["referrer-policy"] == "no-referrer", path
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"], path
    report = _get(app, "GET", f"/reports/{sidecar.run_id}", headers=AUTH)
    assert report.headers["content-security-policy"] == REPORT_CSP
    assert (
        "connect-src" not in REPORT_CSP and "default-src 'none'" in REPORT_CSP
    )  # it sends nothing out
    engine = _get(_engine_app(), "GET", "/v1/models", headers=AUTH)
    assert engine.headers["x-content-type-options"] == "nosniff"


def test_journal_segments_and_reports_are_owner_only(tmp_path):
    """Was: journal segments and reports were written 0644 (readable by every local user)."""
    from dashboards.report.render import write_report

    old = os.umask(0o022)
    try:
        journal = Journal(tmp_path / "journal")
        journal.append([{"id": "s1", "prompt": "a secret prompt"}])
        journal.close()
        segments = [p for p in (tmp_path / "journal").iterdir() if p.suffix == ".jsonl"]
        report = write_report(tmp_path / "reports", 1, "<html>a secret prompt</html>")
    finally:
        os.umask(old)
    assert segments
    for path in [*segments, report]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_public_health_names_no_host_or_process(migrated_db, make_settings):
    """Was: the sidecar's /health carried `instance`: host name, pid and a random suffix."""
    from sidecar.main import Sidecar

    sidecar = Sidecar(make_settings(migrated_db, api_keys=[API_KEY]), migrate=False)
    body = _get(sidecar.app, "GET", "/health").text
    assert socket.gethostname() not in body and f":{os.getpid()}:" not in body
    assert str(os.getpid()) not in body
