"""In headless Chromium: the overview's first sentence is the open incident's headline, then
its severity, age, alerts and who is on it; `/incidents` lists it, its filters narrow the list,
and every link either page shows opens."""

from __future__ import annotations

from headless import assert_links_open, needs_browser, served_in_browser, shot, visit
from seed_incident import HEADLINE, seed_incident

from sidecar.app import create_app
from storage.db import session_factory
from vigil.devtools.seed_history import seed_history

pytestmark = needs_browser


def first_paragraphs(page) -> list[list[str]]:
    return page.eval_on_selector_all(
        "body > p", "ps => ps.slice(0, 3).map(p => [p.id, p.textContent])"
    )


def filtered(page) -> dict:
    rows = page.eval_on_selector_all("#incidents tr", "rows => rows.map(r => r.innerText)")
    page.select_option("select[name=severity]", "moderate")
    page.click("#filters button")
    page.wait_for_load_state("load")
    return {"rows": rows, "after": page.inner_text("body"), "url": page.url}


def test_overview_and_incident_list_in_a_browser(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    with factory() as s:
        data = seed_history(s, hours=2)
        incident_id = seed_incident(s, data)
    with served_in_browser(create_app(make_settings(migrated_db), factory)) as (url, browser):
        overview = visit(
            browser, f"{url}/", shot("overview-incident", migrated_db), first_paragraphs
        )
        listing = visit(browser, f"{url}/incidents", shot("incidents", migrated_db), filtered)
        assert_links_open(url, overview["links"] + listing["links"])
    assert overview["errors"] == [] and listing["errors"] == []
    paragraphs = [p for p in overview["seen"] if p[0]]  # the range picker has no id
    assert paragraphs[0] == ["headline", HEADLINE]
    assert paragraphs[1][0] == "headline-facts" and paragraphs[1][1].startswith(
        f"Incident #{incident_id}: high, since "
    )
    assert "1 alert, not acknowledged." in paragraphs[1][1]
    rows = listing["seen"]["rows"][1:]
    assert len(rows) == 1 and HEADLINE in rows[0] and "not acknowledged" in rows[0]
    assert "severity=moderate" in listing["seen"]["url"]
    assert "No open incidents of severity moderate" in listing["seen"]["after"]
