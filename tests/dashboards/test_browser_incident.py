"""In headless Chromium: the incident page opens with the incident's headline, lists its member
alerts with working links, and a viewer who presses Acknowledge there is shown which key it
needs (a page, not JSON); the new tenant's page lists the incident."""

from __future__ import annotations

from headless import (
    assert_links_open,
    needs_browser,
    served_in_browser,
    shot,
    visit,
)

from sidecar.app import create_app
from storage.db import session_factory
from storage.models import Alert, Incident
from vigil.devtools.seed_history import seed_history

HEADLINE = (
    "New tenant newco (mobile) is 65 % of traffic since 07:12 UTC;"
    " its prompts: helm upgrade, terraform plan"
)

pytestmark = needs_browser


def incident_view(page) -> dict:
    first = page.eval_on_selector("body p", "p => [p.id, p.textContent]")
    members = page.eval_on_selector_all("#members tr", "rows => rows.map(r => r.innerText)")
    page.click("form[action$='/acknowledge'] button")
    page.wait_for_load_state("load")
    return {"first": first, "members": members, "after_click": page.inner_text("body")}


def test_incident_page_in_a_browser(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    with factory() as s:
        data = seed_history(s, hours=2)
        cause = {
            "headline": HEADLINE,
            "order": ["prompt_psi|web"],
            "new_values": [{"feature": "tenant", "value": "newco", "share": 0.65, "count": 195}],
        }
        incident = Incident(
            group_key="drift",
            status="open",
            severity="high",
            kind="persona",
            headline=HEADLINE,
            cause=cause,
            run_id=data.drift_run_id,
            first_seen=data.now,
            last_seen=data.now,
        )
        s.add(incident)
        s.flush()
        s.get(Alert, data.alert_id).incident_id = incident.id
        s.commit()
        incident_id = incident.id
    with served_in_browser(create_app(make_settings(migrated_db), factory)) as (url, browser):
        seen = visit(
            browser, f"{url}/incidents/{incident_id}", shot("incident", migrated_db), incident_view
        )
        segment = visit(
            browser,
            f"{url}/segments?tenant=newco",
            None,
            lambda page: page.eval_on_selector_all(
                "#segment-incidents tr", "rows => rows.map(r => r.innerText)"
            ),
        )
        assert_links_open(url, seen["links"])
    # the refused Acknowledge is answered 403: the only error the console may show
    assert [e for e in seen["errors"] if "403" not in e] == [] and segment["errors"] == []
    assert seen["seen"]["first"] == ["headline", HEADLINE]
    members = seen["seen"]["members"][1:]
    assert len(members) == 1 and str(data.alert_id) in members[0] and "(lead)" in members[0]
    after = seen["seen"]["after_click"]
    assert "needs an admin key" in after and f"incident {incident_id}" in after.lower()
    rows = segment["seen"][1:]
    assert (
        len(rows) == 1 and "its cause names tenant newco as new" in rows[0] and HEADLINE in rows[0]
    )
