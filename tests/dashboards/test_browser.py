"""The dashboard pages in headless Chromium on seeded history: each renders with data, no
console errors, charts draw (one canvas per chart, the expected series), every link on the page
resolves. Screenshots and page weights go to var/screenshots/."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from headless import AUTH, launch, needs_browser, visit
from seed_history import seed_history
from sidecar_servers import UvicornThread

from sidecar.app import create_app
from storage.db import session_factory

SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"

pytestmark = needs_browser


def test_pages_render_and_charts_draw(migrated_db, make_settings):
    from playwright.sync_api import sync_playwright

    factory = session_factory(migrated_db)
    with factory() as session:
        data = seed_history(session, hours=48)
    SHOTS.mkdir(parents=True, exist_ok=True)
    backend = migrated_db.split(":")[0].split("+")[0]
    weights = {}
    with (
        UvicornThread(create_app(make_settings(migrated_db), factory)) as app,
        sync_playwright() as p,
    ):
        browser = launch(p)
        overview = visit(browser, f"{app.url}/?range=7d", SHOTS / f"overview-{backend}.png")
        alert = visit(browser, f"{app.url}/alerts/{data.alert_id}", SHOTS / f"alert-{backend}.png")
        segment = visit(browser, f"{app.url}/segments/acme/web", SHOTS / f"segment-{backend}.png")
        baselines = visit(browser, f"{app.url}/baselines", SHOTS / f"baselines-{backend}.png")
        browser.close()
        for name, seen in (
            ("overview", overview),
            ("alert", alert),
            ("segment", segment),
            ("baselines", baselines),
        ):
            assert seen["errors"] == [], (name, seen["errors"])
            weights[name] = seen["bytes"]
            for href in set(seen["links"]):
                if href.startswith("/") and not href.startswith(
                    "/reports/"
                ):  # reports: no files seeded
                    assert httpx.get(app.url + href, headers=AUTH).status_code == 200, href
    by_id = {c[0]: c for c in overview["charts"]}
    # 3 drift charts (3 segments + threshold), eval (1 evaluator), traffic (2) and 3 latency
    # (p50, p95)
    assert {k: (v[1], v[2]) for k, v in by_id.items()} == {
        "psi:prompt_tokens": (1, 4),
        "ks:latency_ms": (1, 4),
        "mmd:prompt_embedding": (1, 4),
        "eval": (1, 1),
        "traffic": (1, 2),
        "ttft": (1, 2),
        "tpot": (1, 2),
        "latency": (1, 2),
    }
    assert alert["charts"] == [["psi:prompt_tokens", 1, 2]]  # the one segment + threshold
    assert [c[0] for c in segment["charts"]] == ["traffic", "ttft", "tpot", "latency"]
    (SHOTS / f"weights-{backend}.json").write_text(json.dumps(weights))
