"""The overview's headline: its count is every result that moved (not the table's first rows),
and its "worst" never comes from a slice under the floor while a larger slice moved."""

from __future__ import annotations

from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from sidecar_servers import API_KEY

from dashboards.moved import rank_moved
from dashboards.overview import MAX_ROWS
from drift.cause.ranking import FLOOR_N, FLOOR_SHARE
from sidecar.app import create_app
from storage.db import session_factory
from storage.models import DriftResult, DriftRun
from vigil.devtools.seed_history import moved_result, seed_history, tiny_slice_spike

AUTH = {"Authorization": f"Bearer {API_KEY}"}

RESULT = st.fixed_dictionaries(
    {
        "test": st.sampled_from(["psi", "wasserstein", "ks", "new_cluster"]),
        "feature": st.sampled_from(["prompt_tokens", "tpot_ms", "prompt_embedding"]),
        "segment": st.sampled_from(["*", "tenant=acme", "tenant=newco", "segment=web"]),
        "statistic": st.floats(0, 100),
        "p_value": st.floats(1e-300, 1.0),
        "threshold": st.floats(1e-3, 1.0),
        "drifted": st.booleans(),
        "insufficient": st.just(False),
        "detail": st.one_of(
            st.just({}), st.fixed_dictionaries({"n_current": st.integers(0, 2000)})
        ),
    }
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(results=st.lists(RESULT, max_size=30), window=st.integers(1, 2000))
def test_a_small_slice_never_leads_while_a_larger_one_moved(results, window):
    ranked = rank_moved(results, window)
    assert len(ranked) == sum(r["drifted"] for r in results)
    for m in ranked:  # the floor, recomputed from the rows behind each result
        n = m.row.samples if m.row.samples is not None else (window if m.row.segment == "*" else 0)
        n = min(n, window) if m.row.segment == "*" else n  # the window bounds only its own slice
        assert m.samples == n
        assert m.above_floor == (n >= FLOOR_N and min(1.0, n / window) >= FLOOR_SHARE)
    if any(m.above_floor for m in ranked):
        assert ranked[0].above_floor
    # above-floor results all come before the rest
    flags = [m.above_floor for m in ranked]
    assert flags == sorted(flags, reverse=True)


def test_headline_counts_every_moved_signal_and_skips_a_tiny_slice(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    with factory() as session:
        data = seed_history(session, hours=3, samples_per_hour=300)
        run = data.drift_run_id
        # 8 live requests behind a huge ratio: must not lead (the psi in web, 4.5×, does)
        session.add(tiny_slice_spike(run))
        session.query(DriftResult).filter_by(run_id=run, test="psi", segment="web").update(
            {"detail": {"n_current": 150}}
        )
        for i in range(MAX_ROWS + 3):
            session.add(
                moved_result(run, "psi", f"f{i}", "segment=api", 0.21, 0.2, {"n_current": 100})
            )
        session.commit()
    client = TestClient(create_app(make_settings(migrated_db), factory))
    html = client.get("/", headers=AUTH).text
    headline = html.split('id="headline">')[1].split("</p>")[0]
    moved = MAX_ROWS + 3 + 2
    assert headline.startswith(f"{moved} signals moved in the latest window")
    assert (
        "<b>psi · prompt_tokens</b> in segment <b>web</b>, 4.5× its threshold"
        " (150 samples, 50 % of the window)" in headline
    )
    table = html.split('id="moved">')[1].split("</table>")[0]
    assert table.count("<tr") == MAX_ROWS + 1 and f"the {MAX_ROWS} worst of {moved}" in html


def test_the_runs_segment_sizes_bound_the_samples_behind_a_result(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    with factory() as session:
        data = seed_history(session, hours=2, samples_per_hour=300)
        run = session.get(DriftRun, data.drift_run_id)
        run.summary = {"segments": {"*": {"n_current": 300}, "segment=api": {"n_current": 12}}}
        session.query(DriftResult).filter_by(run_id=run.id, test="psi", segment="web").update(
            {"detail": {"n_current": 150}}
        )
        # a feature count larger than its slice (12 rows): the slice bounds it, under the floor
        session.add(
            moved_result(
                run.id, "psi", "completion_tokens", "segment=api", 9.0, 0.2, {"n_current": 200}
            )
        )
        session.commit()
    html = TestClient(create_app(make_settings(migrated_db), factory)).get("/", headers=AUTH).text
    headline = html.split('id="headline">')[1].split("</p>")[0]
    assert "<b>psi · prompt_tokens</b> in segment <b>web</b>" in headline, headline
