"""The dashboard pages in headless Chromium on seeded history: each renders with data, no
console errors, charts draw (one canvas per chart, the expected series), every link on the page
resolves. Screenshots and page weights go to var/screenshots/."""

from __future__ import annotations

import json

from headless import (
    SHOTS,
    assert_links_open,
    backend,
    needs_browser,
    served_in_browser,
    shot,
    visit,
)

from sidecar.app import create_app
from storage.db import session_factory
from vigil.devtools.seed_history import seed_history

pytestmark = needs_browser


def test_pages_render_and_charts_draw(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    with factory() as session:
        data = seed_history(session, hours=48)
    weights = {}
    with served_in_browser(create_app(make_settings(migrated_db), factory)) as (url, browser):
        overview = visit(browser, f"{url}/?range=7d", shot("overview", migrated_db))
        alert = visit(browser, f"{url}/alerts/{data.alert_id}", shot("alert", migrated_db))
        segment = visit(browser, f"{url}/segments/acme/web", shot("segment", migrated_db))
        baselines = visit(browser, f"{url}/baselines", shot("baselines", migrated_db))
        for name, seen in (
            ("overview", overview),
            ("alert", alert),
            ("segment", segment),
            ("baselines", baselines),
        ):
            assert seen["errors"] == [], (name, seen["errors"])
            weights[name] = seen["bytes"]
            assert_links_open(url, seen["links"])
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
    (SHOTS / f"weights-{backend(migrated_db)}.json").write_text(json.dumps(weights))
