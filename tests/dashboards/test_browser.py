"""The dashboard pages in headless Chromium on seeded history: each renders with data, no
console errors, charts draw (one canvas per chart, the expected series), every link on the page
resolves. Screenshots and page weights go to var/screenshots/."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import httpx
import pytest
from seed_history import seed_history
from sidecar_servers import API_KEY, UvicornThread

from sidecar.app import create_app
from storage.db import session_factory

SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
AUTH = {"Authorization": f"Bearer {API_KEY}"}

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None and not Path("/usr/bin/chromium").exists(),
                                reason="needs Debian's chromium (vigil doctor --fix installs it)")


def visit(browser, url: str, shot: Path) -> dict:
    """Open `url`; wait until every chart container has loaded; return what the page showed."""
    context = browser.new_context(extra_http_headers=AUTH, viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    weight = {"bytes": 0}
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))

    def on_response(r):
        if r.status >= 400:
            errors.append(f"{r.status} {r.url}")
        with contextlib.suppress(Exception):  # redirects have no body
            weight["bytes"] += len(r.body())

    page.on("response", on_response)
    page.goto(url, wait_until="load")
    # a selector wait, not wait_for_function: the page's CSP forbids the eval that would need
    page.wait_for_selector("[data-series]:not([data-loaded])", state="detached", timeout=15000)
    page.screenshot(path=str(shot), full_page=True)
    charts = page.eval_on_selector_all(
        "[data-series] .chart", "els => els.map(e => [e.dataset.chartId, e.querySelectorAll('canvas').length,"
        " Number(e.dataset.seriesCount || 0)])")
    links = page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))")
    context.close()
    return {"errors": errors, "charts": charts, "links": links, "bytes": weight["bytes"]}


def test_pages_render_and_charts_draw(migrated_db, make_settings):
    from playwright.sync_api import sync_playwright

    factory = session_factory(migrated_db)
    with factory() as session:
        data = seed_history(session, hours=48)
    SHOTS.mkdir(parents=True, exist_ok=True)
    backend = migrated_db.split(":")[0].split("+")[0]
    weights = {}
    with UvicornThread(create_app(make_settings(migrated_db), factory)) as app, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                    args=["--headless", "--no-sandbox", "--disable-gpu"])
        overview = visit(browser, f"{app.url}/?range=7d", SHOTS / f"overview-{backend}.png")
        alert = visit(browser, f"{app.url}/alerts/{data.alert_id}", SHOTS / f"alert-{backend}.png")
        segment = visit(browser, f"{app.url}/segments/acme/web", SHOTS / f"segment-{backend}.png")
        baselines = visit(browser, f"{app.url}/baselines", SHOTS / f"baselines-{backend}.png")
        browser.close()
        for name, seen in (("overview", overview), ("alert", alert), ("segment", segment), ("baselines", baselines)):
            assert seen["errors"] == [], (name, seen["errors"])
            weights[name] = seen["bytes"]
            for href in set(seen["links"]):
                if href.startswith("/") and not href.startswith("/reports/"):  # reports: no files seeded
                    assert httpx.get(app.url + href, headers=AUTH).status_code == 200, href
    by_id = {c[0]: c for c in overview["charts"]}
    # 3 drift charts (3 segments + threshold), eval (1 evaluator), traffic (2) and 3 latency (p50, p95)
    assert {k: (v[1], v[2]) for k, v in by_id.items()} == {
        "psi:prompt_tokens": (1, 4), "ks:latency_ms": (1, 4), "mmd:prompt_embedding": (1, 4),
        "eval": (1, 1), "traffic": (1, 2), "ttft": (1, 2), "tpot": (1, 2), "latency": (1, 2)}
    assert alert["charts"] == [["psi:prompt_tokens", 1, 2]]  # the one segment + threshold
    assert [c[0] for c in segment["charts"]] == ["traffic", "ttft", "tpot", "latency"]
    (SHOTS / f"weights-{backend}.json").write_text(json.dumps(weights))
