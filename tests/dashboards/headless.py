"""Headless Chromium for the dashboard's browser tests (helper; no tests): the skip marker that
says what is missing, `served_in_browser` (the app on a port and a browser to visit it), `visit`,
which opens a page, waits for its charts and returns what it showed, and where screenshots go."""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sidecar_servers import API_KEY, UvicornThread

AUTH = {"Authorization": f"Bearer {API_KEY}"}
CHROMIUM = shutil.which("chromium") or next(
    (p for p in ("/usr/bin/chromium",) if Path(p).exists()), None
)
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu"]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def browser_missing() -> str | None:
    if importlib.util.find_spec("playwright") is None:
        return "needs the playwright package (the test extra: pip install -e '.[test]')"
    if CHROMIUM is None:
        return (
            "needs Debian's chromium: `make test-setup` (python3 -m vigil.devtools.doctor --fix)"
            " installs it"
        )
    return None


needs_browser = pytest.mark.skipif(browser_missing() is not None, reason=browser_missing() or "")


def launch(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)


@contextlib.contextmanager
def served_in_browser(app) -> Iterator[tuple[str, Any]]:
    """`app` served on a free port and a headless Chromium: (the app's base URL, the browser)."""
    from playwright.sync_api import sync_playwright

    with UvicornThread(app) as server, sync_playwright() as p:
        browser = launch(p)
        try:
            yield server.url, browser
        finally:
            browser.close()


def backend(database_url: str) -> str:
    return database_url.split(":")[0].split("+")[0]


def shot(name: str, database_url: str) -> Path:
    """Where a page's screenshot goes: var/screenshots/<name>-<backend>.png."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    return SHOTS / f"{name}-{backend(database_url)}.png"


def assert_links_open(base_url: str, links: list[str]) -> None:
    """Every link a page showed into the app answers 200 (reports aside: no report files are
    seeded)."""
    for href in set(links):
        if href.startswith("/") and not href.startswith("/reports/"):
            assert httpx.get(base_url + href, headers=AUTH).status_code == 200, href


def visit(browser, url: str, shot: Path | None = None, inspect=None) -> dict:
    """Open `url`; wait until every chart container has loaded; return what the page showed.
    `inspect(page)`, if given, adds its answer under "seen"."""
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
    if shot is not None:
        page.screenshot(path=str(shot), full_page=True)
    charts = page.eval_on_selector_all(
        "[data-series] .chart",
        "els => els.map(e => [e.dataset.chartId, e.querySelectorAll('canvas').length,"
        " Number(e.dataset.seriesCount || 0)])",
    )
    links = page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))")
    seen = inspect(page) if inspect is not None else None
    context.close()
    return {
        "errors": errors,
        "charts": charts,
        "links": links,
        "bytes": weight["bytes"],
        "seen": seen,
    }
