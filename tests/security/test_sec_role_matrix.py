"""Every route of both services, for every role, through a real uvicorn server built by the
production config: who is let in (any status but 401/403) and who is refused (401 without a
valid key, 403 with a key whose role may not). The routes come from `app.routes`, so a route
added without an entry in the tables below fails here until someone decides who may call it.

Roles: no key, a wrong key, a tenant key, a global key (the reader), an operator key, an admin
key. Access classes:
- `open`: everyone (health, login form, logout, static favicon, the engine's /metrics);
- `key`: any valid key (the engine API, ingest, OTLP);
- `reader`: global and admin keys (every page, chart API and the sidecar's /metrics);
- `admin`: admin keys only (baseline and alert actions);
- `login`: the key travels in the form; readers get a session (303), the rest a 401;
- `slack`: Slack's signature alone (no key opens it): every role without one gets a 401.
"""

from __future__ import annotations

import httpx
import pytest
from sec_fakes import ADMIN_KEY, API_KEY, MODEL, OPERATOR_KEY, TENANT_KEY
from sec_servers import engine_server, settings_for, sidecar_server

KEYS = {
    "none": None,
    "wrong": "wrong-key-0123456789abcdef",
    "tenant": TENANT_KEY,
    "global": API_KEY,
    "operator": OPERATOR_KEY,
    "admin": ADMIN_KEY,
}
ALLOWED = {
    "open": set(KEYS),
    "key": {"tenant", "global", "operator", "admin"},
    "reader": {"global", "admin"},
    "admin": {"admin"},
    "login": {"global", "admin"},
    "slack": set(),
}

SIDECAR = {
    ("GET", "/openapi.json"): "open",
    ("GET", "/favicon.ico"): "open",
    ("GET", "/health"): "open",
    ("POST", "/v1/ingest"): "key",
    ("POST", "/v1/traces"): "key",
    ("POST", "/v1/logs"): "key",
    ("POST", "/slack/actions"): "slack",
    ("GET", "/login"): "open",
    ("POST", "/login"): "login",
    ("POST", "/logout"): "open",
    ("GET", "/reports"): "reader",
    ("GET", "/reports/{run_id}"): "reader",
    ("GET", "/reports/{run_id}/evidently"): "reader",
    ("GET", "/alerts"): "reader",
    ("GET", "/metrics"): "reader",
    ("GET", "/baselines"): "reader",
    ("POST", "/baselines/{action}"): "admin",
    ("GET", "/api/v1/series"): "reader",
    ("GET", "/alerts/{alert_id}"): "reader",
    ("POST", "/alerts/{row_id}/{action}"): "admin",
    ("POST", "/api/v1/alerts/{row_id}/{action}"): "admin",
    ("GET", "/incidents"): "reader",
    ("GET", "/api/v1/incidents"): "reader",
    ("GET", "/incidents/{incident_id}"): "reader",
    ("POST", "/incidents/{incident_id}/expected"): "admin",
    ("POST", "/api/v1/incidents/{incident_id}/expected"): "admin",
    ("GET", "/silences"): "reader",
    ("GET", "/api/v1/silences"): "reader",
    ("POST", "/silences"): "admin",
    ("POST", "/api/v1/silences"): "admin",
    ("POST", "/silences/{silence_id}/expire"): "admin",
    ("POST", "/api/v1/silences/{silence_id}/expire"): "admin",
    ("POST", "/incidents/{row_id}/{action}"): "admin",
    ("POST", "/api/v1/incidents/{row_id}/{action}"): "admin",
    ("GET", "/segments"): "reader",
    ("GET", "/segments/{tenant}/{segment}"): "reader",
    ("GET", "/clusters/{run_id}"): "reader",
    ("GET", "/static/{path:path}"): "reader",
    ("GET", "/"): "reader",
}
ENGINE = {
    ("GET", "/openapi.json"): "open",
    ("GET", "/health"): "open",
    ("GET", "/metrics"): "open",
    ("GET", "/v1/models"): "key",
    ("GET", "/v1/models/{model_id:path}"): "key",
    ("POST", "/v1/chat/completions"): "key",
    ("POST", "/v1/completions"): "key",
}
PARAMS = {
    "{run_id}": "1",
    "{alert_id}": "1",
    "{incident_id}": "1",
    "{row_id}": "999999",
    "{silence_id}": "999999",
    "{action}": "acknowledge",
    "{tenant}": "acme",
    "{segment}": "default",
    "{path:path}": "dashboard.js",
    "{model_id:path}": MODEL,
}
BODIES = {
    "/v1/chat/completions": {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]},
    "/v1/completions": {"model": MODEL, "prompt": "hi"},
}


def routes_of(app) -> set[tuple[str, str]]:
    """(method, path template) of every route, through included routers."""
    found = set()
    for route in app.routes:
        contexts = getattr(route, "effective_route_contexts", None)
        for each in contexts() if contexts else [route]:
            for method in each.methods or ():
                if method != "HEAD":
                    found.add((method, each.path))
    return found


def _concrete(path: str) -> str:
    for name, value in PARAMS.items():
        path = path.replace(name, value)
    return path


def _call(client: httpx.Client, method: str, template: str, role: str) -> int:
    key = KEYS[role]
    client.cookies.clear()  # a session from an earlier login never speaks for the next role
    login_form = (method, template) == ("POST", "/login")
    headers = {"accept": "application/json"}
    if key and not login_form:
        headers["authorization"] = f"Bearer {key}"
    path = _concrete(template)
    if login_form:
        return client.post(
            path, data={"key": key or "", "next": "/alerts"}, headers=headers
        ).status_code
    if method == "GET":
        return client.get(path, headers=headers).status_code
    body = BODIES.get(template, {})
    if template in ("/v1/traces", "/v1/logs"):
        headers["content-type"] = "application/x-protobuf"
        return client.post(path, content=b"", headers=headers).status_code
    return client.post(path, json=body, headers=headers).status_code


def _check(url: str, table: dict[tuple[str, str], str], app_routes: set) -> None:
    missing = app_routes - set(table)
    assert not missing, (
        f"routes with no entry in the role matrix (decide who may call them): {missing}"
    )
    assert not set(table) - app_routes, (
        f"entries for routes that no longer exist: {set(table) - app_routes}"
    )
    wrong = []
    with httpx.Client(base_url=url, timeout=30, follow_redirects=False) as client:
        for (method, template), access in sorted(table.items()):
            for role in KEYS:
                status = _call(client, method, template, role)
                let_in = status not in (401, 403)
                if role in ALLOWED[access]:
                    ok = let_in and status != 429
                else:
                    keyless = role in ("none", "wrong") or access in ("login", "slack")
                    expected = 401 if keyless else 403
                    ok = status == expected
                if not ok:
                    wrong.append(f"{method} {template} as {role}: {status} ({access})")
    assert not wrong, "\n".join(wrong)


def _settings(**overrides):
    return settings_for(
        api_keys=[API_KEY],
        tenant_keys={TENANT_KEY: "acme"},
        operator_keys=[OPERATOR_KEY],
        admin_keys=[ADMIN_KEY],
        auth_failures_per_minute=0,  # every wrong key is answered 401, never throttled here
        api_docs=True,
        **overrides,
    )


def test_every_sidecar_route_lets_in_exactly_its_roles(migrated_db, tmp_path):
    from sidecar.app import create_app
    from storage.db import session_factory

    settings = _settings(
        database_url=migrated_db,
        report_dir=tmp_path / "reports",
        slack_signing_secret="slack-signing-secret-0123456789",
    )
    app = create_app(settings, session_factory(migrated_db))
    with sidecar_server(settings, app) as url:
        _check(url, SIDECAR, routes_of(app))


def test_every_engine_route_lets_in_exactly_its_roles():
    from sec_fakes import FakeEngine

    from serving.server.service.app import create_app

    settings = _settings()
    routes = routes_of(create_app(settings, engine=FakeEngine(), log_traffic=False))
    with engine_server(settings) as url:
        _check(url, ENGINE, routes)


@pytest.mark.parametrize("table", [SIDECAR, ENGINE], ids=["sidecar", "engine"])
def test_every_access_class_is_known(table):
    assert set(table.values()) <= set(ALLOWED)
