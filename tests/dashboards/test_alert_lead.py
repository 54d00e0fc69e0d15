"""Every alert page opens with its own result: the alert's own test, feature and segment (its
evidence), never a bigger signal of the same run that the alert's rule did not fire on; its
result table lists the alert's own rows first, then its segment, each row naming its segment."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sidecar_servers import API_KEY

from dashboards.alert_lead import Row, lead_row, lead_sentence, own_rows, ratio, table_rows, who
from dashboards.alert_words import effect_size
from sidecar.app import create_app
from storage.db import session_factory
from storage.models import Alert, DriftResult
from vigil.devtools.seed_history import seed_history, tiny_slice_spike

VIEW = {"Authorization": f"Bearer {API_KEY}"}
TESTS = {"psi": "statistic", "wasserstein": "statistic", "ks": "p_value", "chi2": "p_value"}
FEATURES = ("prompt_tokens", "tpot_ms", "latency_ms", "tenant")
SEGMENTS = ("*", "tenant=acme", "tenant=newco", "segment=web", "web")


@st.composite
def results(draw, n_min=1):
    keys = draw(
        st.lists(
            st.tuples(
                st.sampled_from(sorted(TESTS)), st.sampled_from(FEATURES), st.sampled_from(SEGMENTS)
            ),
            min_size=n_min,
            max_size=25,
            unique=True,
        )
    )
    out = []
    for test, feature, segment in keys:
        drifted = draw(st.booleans())
        if TESTS[test] == "p_value":
            threshold = draw(st.sampled_from([0.05, 0.01, 1e-3]))
            p = draw(st.floats(1e-30, 1.0)) if not drifted else draw(st.floats(1e-300, threshold))
            out.append(
                {
                    "test": test,
                    "feature": feature,
                    "segment": segment,
                    "statistic": draw(st.floats(0, 500)),
                    "p_value": p,
                    "threshold": threshold,
                    "drifted": drifted,
                    "detail": {"n_current": draw(st.integers(1, 5000))},
                }
            )
        else:
            threshold = draw(st.floats(0.01, 1.0))
            stat = (
                draw(st.floats(threshold * 1.01, threshold * 100))
                if drifted
                else draw(st.floats(0, threshold))
            )
            out.append(
                {
                    "test": test,
                    "feature": feature,
                    "segment": segment,
                    "statistic": stat,
                    "p_value": None,
                    "threshold": threshold,
                    "drifted": drifted,
                    "detail": {"n_current": draw(st.integers(1, 5000))},
                }
            )
    return out


@settings(max_examples=200, deadline=None, derandomize=True)
@given(data=st.data())
def test_the_lead_is_the_alerts_own_worst_result(data):
    run = data.draw(results(n_min=2))
    own_dicts = data.draw(
        st.lists(
            st.sampled_from(run),
            min_size=1,
            max_size=len(run),
            unique_by=lambda r: (r["test"], r["feature"], r["segment"]),
        )
    )
    alert_segment = own_dicts[0]["segment"]
    own = own_rows({"results": own_dicts}, run)
    lead = lead_row(own)
    sentence = lead_sentence("summary", own, "12-03 06:00 → 07:00 UTC", 6000)
    assert sentence.startswith(f"{lead.test} on {lead.feature} for {who(lead.segment)}")
    assert (lead.test, lead.feature, lead.segment) in {
        (r["test"], r["feature"], r["segment"]) for r in own_dicts
    }
    moved = [r for r in own if r.drifted] or own
    assert ratio(lead) == max(ratio(r) for r in moved)
    rows, left_out = table_rows(alert_segment, own, run)
    assert [r.own for r in rows[: len(own)]] == [True] * len(own) and not any(
        r.own for r in rows[len(own) :]
    )
    later = rows[len(own) :]
    # the alert's segment before the other segments, which show only what moved
    firsts = [r.segment == alert_segment for r in later]
    assert firsts == sorted(firsts, reverse=True)
    assert all(r.drifted for r in later if r.segment != alert_segment)
    assert len(rows) + left_out == len({(r["test"], r["feature"], r["segment"]) for r in run})


def test_no_evidence_falls_back_to_the_summary():
    assert (
        lead_sentence("monitor_backlog: 5000 samples waiting", [], None, None)
        == "monitor_backlog: 5000 samples waiting"
    )
    assert (
        who("*") == "all traffic"
        and who("tenant=newco") == "tenant newco"
        and who("web") == "segment web"
    )


def test_new_categories_are_named_with_their_share():
    row = Row(
        "new_category",
        "tenant",
        "*",
        0.65,
        None,
        0.05,
        True,
        detail={
            "new": [
                {"value": "newco", "share": 0.65, "count": 195, "big": True},
                {"value": "stray", "share": 0.01, "count": 3, "big": False},
            ],
            "n_current": 300,
        },
        own=True,
    )
    sentence = lead_sentence("s", [row], None, 300)
    assert sentence.startswith(
        "new_category on tenant for all traffic: new values newco (65% of the window)"
    )
    assert "(195 samples, 65% of the window)" in sentence  # the rows holding the new value
    assert "stray" not in sentence  # a stray value is listed in the evidence, not in the lead


@pytest.fixture
def world(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    with factory() as session:
        seeded = seed_history(session, hours=3)
        # a bigger signal of the same run that no alert below fires on: it must never lead
        session.add(tiny_slice_spike(seeded.drift_run_id))
        session.commit()
    return seeded, TestClient(create_app(make_settings(migrated_db), factory)), factory


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    pick=st.lists(
        st.tuples(st.sampled_from(["psi", "ks", "mmd"]), st.sampled_from(["*", "web", "api"])),
        min_size=1,
        max_size=4,
        unique=True,
    )
)
def test_every_alert_page_starts_with_its_own_result(world, pick):
    data, client, factory = world
    features = {"psi": "prompt_tokens", "ks": "latency_ms", "mmd": "prompt_embedding"}
    with factory() as s:
        stored = {
            (r.test, r.segment): r for r in s.query(DriftResult).filter_by(run_id=data.drift_run_id)
        }
        evidence = [
            {
                "test": t,
                "feature": features[t],
                "segment": seg,
                "statistic": stored[(t, seg)].statistic,
                "p_value": stored[(t, seg)].p_value,
                "threshold": stored[(t, seg)].threshold,
                "drifted": stored[(t, seg)].drifted,
            }
            for t, seg in pick
        ]
        alert = Alert(
            dedupe_key=f"k{pick}",
            rule="r",
            kind="prompt",
            severity="moderate",
            segment=pick[0][1],
            status="open",
            summary="summary",
            run_id=data.drift_run_id,
            evidence={"results": evidence},
            first_seen=data.now,
            last_seen=data.now,
        )
        s.add(alert)
        s.commit()
        alert_id = alert.id
    html = client.get(f"/alerts/{alert_id}", headers=VIEW).text
    words = html.split('id="lead">')[1].split("</p>")[0]
    lead = html.split('id="evidence-lead" class="muted">Evidence: ')[1].split("</p>")[0]
    own = own_rows({"results": evidence}, list(stored.values()))
    expected = max([r for r in own if r.drifted] or own, key=effect_size)
    assert lead.startswith(f"{expected.test} on {expected.feature} for {who(expected.segment)}"), (
        lead
    )
    # the first sentence is in words: whom it concerns, never the test or its p-value
    assert f"for {who(expected.segment)} since " in words and "p =" not in words, words
    assert expected.test not in words.split(" for ")[0]
    assert "tpot_ms" not in lead
    chart = html.split('id="signal-chart" data-series="')[1].split('"')[0]
    assert f"test={expected.test}&amp;feature={expected.feature}" in chart
    table = html.split('id="results">')[1].split("</table>")[0]
    rows = table.split("<tr")[2:]
    assert all("(this alert)" in r for r in rows[: len(pick)]) and "(this alert)" not in "".join(
        rows[len(pick) :]
    )
    assert "<th>segment</th>" in table
