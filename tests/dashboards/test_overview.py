"""The overview page and its chart data (`/`, `/api/v1/series`) on seeded history, checked
against independent recomputations from the seeded rows (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sidecar_servers import API_KEY

from sidecar.app import create_app
from storage.db import session_factory
from storage.models import EvalScore, Sample
from vigil.devtools.seed_history import seed_history

AUTH = {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture
def seeded(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    with factory() as session:
        seeded = seed_history(session, hours=30)
    client = TestClient(create_app(make_settings(migrated_db), factory))
    return seeded, client, factory


def test_overview_leads_with_what_moved(seeded):
    data, client, _ = seeded
    page = client.get("/", headers=AUTH)
    assert page.status_code == 200
    html = page.text
    assert "1 signal moved in the latest window" in html
    assert "<b>psi · prompt_tokens</b> in segment <b>web</b>, 4.5× its threshold" in html
    assert (
        f'href="/reports/{data.drift_run_id}"' in html and f'href="/alerts/{data.alert_id}"' in html
    )
    assert 'data-series="/api/v1/series?kind=drift&amp;range=24h"' in html
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert client.get("/?range=7d", headers=AUTH).status_code == 200
    assert client.get("/?range=1y", headers=AUTH).status_code == 422


def test_pages_and_data_need_a_key(seeded):
    _, client, _ = seeded
    for path in ("/", "/api/v1/series?kind=drift", "/metrics", "/static/charts.js"):
        r = client.get(path, follow_redirects=False)
        assert r.status_code == 401, path
        assert client.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401


def test_drift_series_align_runs_segments_and_thresholds(seeded):
    data, client, _ = seeded
    body = client.get("/api/v1/series?kind=drift&range=24h", headers=AUTH).json()
    assert body["baseline_id"] == data.baseline_id
    first = body["charts"][0]
    assert first["id"] == "psi:prompt_tokens" and first["drifted"]
    labels = [s["label"] for s in first["series"]]
    assert (
        labels[0] == "all" and labels[1] == "web"
    )  # all traffic first, then the segment that moved
    # runs whose window ended in the last 24 h, in time order, one x per run
    assert first["runs"] == data.run_ids[-24:] and first["runs"][-1] == data.drift_run_id
    assert first["x"] == sorted(first["x"]) and len(first["x"]) == 24
    web = first["series"][1]["values"]
    assert web[-1] == pytest.approx(0.9) and max(web[:-1]) < 0.2
    assert set(first["threshold"]) == {0.2}
    ks = next(c for c in body["charts"] if c["id"] == "ks:latency_ms")
    assert ks["unit"] == "-log10 p" and ks["threshold"][0] == pytest.approx(2.0)  # alpha 0.01
    only = client.get("/api/v1/series?kind=drift&test=ks&segment=api", headers=AUTH).json()[
        "charts"
    ]
    assert [c["id"] for c in only] == ["ks:latency_ms"] and [
        s["label"] for s in only[0]["series"]
    ] == ["api"]


def test_traffic_and_eval_series_match_a_recount(seeded):
    data, client, factory = seeded
    body = client.get("/api/v1/series?kind=traffic&range=7d", headers=AUTH).json()
    start, bucket = body["start"], body["bucket_s"]
    with factory() as s:
        rows = [(r.timestamp.timestamp(), r.latency_ms, r.ttft_ms) for r in s.query(Sample)]
        scores = [
            (r[0].timestamp(), r[1])
            for r in s.query(Sample.timestamp, EvalScore.score).join(
                EvalScore, EvalScore.sample_id == Sample.id
            )
        ]
    charts = {c["id"]: c for c in body["charts"]}
    x = charts["traffic"]["x"]
    counts = charts["traffic"]["series"][0]["values"]
    assert sum(counts) == len(rows)
    for i, edge in enumerate(x):
        inside = [lat for ts, lat, _ in rows if edge <= ts < edge + bucket and ts >= start]
        assert counts[i] == len(inside)
        p95 = charts["latency"]["series"][1]["values"][i]
        if inside:
            assert p95 == pytest.approx(np.percentile(inside, 95), abs=1e-3)
        else:
            assert p95 is None
    eval_chart = client.get("/api/v1/series?kind=eval&range=7d", headers=AUTH).json()["charts"][0]
    judged = eval_chart["series"][0]
    assert judged["label"] == "judge"
    for i, edge in enumerate(eval_chart["x"]):
        inside = [score for ts, score in scores if edge <= ts < edge + bucket]
        assert judged["values"][i] == (
            pytest.approx(np.mean(inside), rel=1e-4) if inside else None
        )  # 5 digits
    # each hour bucket links the run whose window holds it; the current hour has none yet
    assert eval_chart["runs"][-2:] == [data.drift_run_id, None]


def test_unknown_baseline_is_404(seeded):
    _, client, _ = seeded
    r = client.get("/api/v1/series?kind=drift&baseline=999", headers=AUTH)
    assert r.status_code == 404 and "999" in r.json()["detail"]


PARAM_NAMES = st.sampled_from(
    ["kind", "range", "test", "feature", "segment", "tenant", "baseline", "x"]
)
PARAM_VALUES = st.one_of(
    st.sampled_from(
        [
            "drift",
            "eval",
            "traffic",
            "24h",
            "7d",
            "30d",
            "psi",
            "web",
            "1",
            "0",
            "-1",
            "99999999999999999999",
            "",
        ]
    ),
    st.text(max_size=300),
)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(params=st.lists(st.tuples(PARAM_NAMES, PARAM_VALUES), max_size=6))
def test_any_query_is_answered_200_or_4xx_with_a_message(seeded, params):
    _, client, _ = seeded
    r = client.get("/api/v1/series", params=params, headers=AUTH)
    assert r.status_code == 200 or 400 <= r.status_code < 500, (params, r.status_code)
    if r.status_code != 200:
        assert r.json()["detail"]
    else:
        assert isinstance(r.json()["charts"], list)


def test_range_bounds_history(seeded):
    data, client, _ = seeded
    month = client.get("/api/v1/series?kind=drift&range=30d", headers=AUTH).json()
    chart = month["charts"][0]
    assert chart["id"] == "psi:prompt_tokens" and month["bucket_s"] == 6 * 3600
    # one x per 6-hour bucket holding a run window end; the 30 hourly runs fill 5 or 6 of them
    ends = [(data.now - timedelta(hours=30 - h - 1)).timestamp() for h in range(30)]
    assert chart["x"] == sorted({end // month["bucket_s"] * month["bucket_s"] for end in ends})
    assert set(chart["runs"]) <= set(data.run_ids) and chart["runs"][-1] == data.drift_run_id
    assert chart["series"][1]["label"] == "web" and chart["series"][1]["values"][
        -1
    ] == pytest.approx(0.9)
    assert chart["x"][0] >= (data.now - timedelta(days=30)).timestamp()
