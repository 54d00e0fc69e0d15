"""A slice's page lists the open alerts that involve it: filed under its label, with a result
in it, or naming it as a new value of its key — the alert a new tenant raises is filed under
`*`, and `/segments?tenant=newco` must still find it."""

from __future__ import annotations

from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from sidecar_servers import API_KEY

from dashboards.segment_alerts import involvement
from sidecar.app import create_app
from storage.db import session_factory
from storage.models import Alert, Incident
from vigil.devtools.seed_history import new_tenant_alert, new_tenant_result, seed_history

AUTH = {"Authorization": f"Bearer {API_KEY}"}
NAMES = st.sampled_from(["newco", "acme", "web", "a/b", "x=y", "*"])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    filed=st.sampled_from(["*", "tenant=newco", "tenant=acme", "segment=web"]),
    results=st.lists(
        st.fixed_dictionaries(
            {
                "test": st.sampled_from(["new_category", "psi", "chi2"]),
                "feature": st.sampled_from(["tenant", "segment", "prompt_tokens"]),
                "segment": st.sampled_from(["*", "tenant=newco", "tenant=acme", "segment=web"]),
                "detail": st.fixed_dictionaries(
                    {
                        "new": st.lists(st.fixed_dictionaries({"value": NAMES}), max_size=3),
                        "vanished": st.lists(NAMES, max_size=2),
                    }
                ),
            }
        ),
        max_size=5,
    ),
    key=st.sampled_from(["tenant", "segment"]),
    name=NAMES,
)
def test_an_alert_involves_a_slice_exactly_when_it_names_it(filed, results, key, name):
    found = involvement(filed, {"results": results}, [(key, name)])
    label = f"{key}={name}"
    names_it = [
        r
        for r in results
        if r["segment"] == label
        or (
            r["feature"] == key
            and (
                name in [v["value"] for v in r["detail"]["new"]] or name in r["detail"]["vanished"]
            )
        )
    ]
    assert (found is not None) == (filed == label or bool(names_it))
    if found is not None:
        assert found[0]  # a reason, in words
        assert list(found[1]) == [(r["test"], r["feature"], r["segment"]) for r in names_it]


def test_a_new_tenants_alert_filed_under_all_traffic_is_on_its_page(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    with factory() as s:
        data = seed_history(s, hours=2)
        s.add(new_tenant_result(data))
        s.add(new_tenant_alert(data))
        s.commit()
    client = TestClient(create_app(make_settings(migrated_db), factory))
    html = client.get("/segments?tenant=newco", headers=AUTH).text
    table = html.split('id="segment-alerts"')[1].split("</table>")[0]
    assert "new tenant newco: 65% of the window" in table and "names tenant newco as new" in table
    assert "all traffic" in table
    # its signal is charted on the page, though the baseline has no tenant=newco slice to chart
    assert (
        "kind=drift&amp;range=7d&amp;test=new_category&amp;feature=tenant&amp;segment=%2A" in html
    )
    # the seeded alert on "web" is not newco's; acme's page does not list newco's alert
    assert "psi on prompt_tokens moved in web" not in table
    acme = client.get("/segments?tenant=acme", headers=AUTH).text
    assert "new tenant newco" not in acme


def test_an_incident_involves_a_slice_its_cause_or_a_member_names(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    with factory() as s:
        data = seed_history(s, hours=2)
        cause = {
            "headline": "New tenant newco (mobile) is 65 % of traffic since 07:12 UTC",
            "new_values": [{"feature": "tenant", "value": "newco", "share": 0.65, "count": 195}],
            "worst": {"test": "new_category", "feature": "tenant", "segment": "*"},
            "order": ["new_category|*"],
        }
        newco = Incident(
            group_key="drift",
            status="open",
            severity="high",
            kind="persona",
            headline=cause["headline"],
            cause=cause,
            run_id=data.drift_run_id,
            first_seen=data.now,
            last_seen=data.now,
        )
        web = Incident(
            group_key="drift-old",
            status="open",
            severity="moderate",
            kind="prompt",
            headline="Prompts moved in segment web",
            cause={"order": []},
            run_id=data.drift_run_id,
            first_seen=data.now,
            last_seen=data.now,
        )
        s.add_all([newco, web])
        s.flush()
        member = s.get(Alert, data.alert_id)  # web's member, filed under segment=web
        member.incident_id, member.segment = web.id, "segment=web"
        s.commit()
        ids = newco.id, web.id
    client = TestClient(create_app(make_settings(migrated_db), factory))
    page = client.get("/segments?tenant=newco", headers=AUTH).text
    table = page.split('id="segment-incidents"')[1].split("</table>")[0]
    assert f'href="/incidents/{ids[0]}"' in table and "its cause names tenant newco as new" in table
    assert f'href="/incidents/{ids[1]}"' not in table
    page = client.get("/segments?segment=web", headers=AUTH).text
    table = page.split('id="segment-incidents"')[1].split("</table>")[0]
    assert (
        f'href="/incidents/{ids[1]}"' in table
        and f"member alert {data.alert_id}: filed under segment=web" in table
    )
    assert "New tenant newco" not in table
