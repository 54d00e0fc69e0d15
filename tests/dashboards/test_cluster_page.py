"""/clusters/{run_id}: PCA projection (checked against scikit-learn) drawn as SVG, new clusters
highlighted with their share and representative prompts (SQLite and PostgreSQL)."""

from __future__ import annotations

import numpy as np
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from sidecar_servers import API_KEY
from sklearn.decomposition import PCA

from dashboards.projection import pca_2d, subsample, svg_scatter
from sidecar.app import create_app
from storage.db import session_factory
from storage.models import BaselineSample, DriftResult, DriftRun, Embedding, Sample
from storage.records import vector_to_bytes
from vigil.devtools.seed_history import seed_history

AUTH = {"Authorization": f"Bearer {API_KEY}"}


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    n_base=st.integers(3, 40),
    n_win=st.integers(3, 40),
    dim=st.integers(3, 12),
    seed=st.integers(0, 10**6),
)
def test_pca_matches_scikit_learn_up_to_sign(n_base, n_win, dim, seed):
    rng = np.random.default_rng(seed)
    base, win = rng.normal(size=(n_base, dim)), rng.normal(loc=1.0, size=(n_win, dim))
    base_xy, win_xy, ratio = pca_2d(base, win)
    oracle = PCA(n_components=2, svd_solver="full").fit(np.vstack([base, win]))
    expected = oracle.transform(np.vstack([base, win]))
    got = np.vstack([base_xy, win_xy])
    signs = np.sign(np.sum(got * expected, axis=0))
    assert np.allclose(got * signs, expected, atol=1e-8)
    assert np.allclose(ratio, oracle.explained_variance_ratio_)


def test_subsample_is_bounded_and_seeded():
    x = np.zeros((5000, 2))
    a, b = subsample(x, 100, seed=3), subsample(x, 100, seed=3)
    assert len(a) == 100 and np.array_equal(a, b) and np.all(np.diff(a) > 0)
    assert np.array_equal(subsample(x[:50], 100), np.arange(50))


def test_svg_draws_every_point_once():
    svg = svg_scatter(np.zeros((3, 2)), np.ones((4, 2)), {1, 3})
    assert (
        svg.count('class="b"') == 3 and svg.count('class="w"') == 2 and svg.count('class="n"') == 2
    )


def test_cluster_page_highlights_the_new_group(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    rng = np.random.default_rng(0)
    with factory() as s:
        data = seed_history(s, hours=3)
        run = s.get(DriftRun, data.drift_run_id)
        for i in range(30):
            blob, _ = vector_to_bytes(rng.normal(size=8).astype(np.float32))
            s.add(
                BaselineSample(
                    baseline_id=data.baseline_id,
                    sample_id=f"b{i}",
                    record={},
                    prompt_embedding=blob,
                )
            )
        ids = [
            sid
            for (sid,) in s.query(Sample.id)
            .filter(Sample.timestamp >= run.window_start, Sample.timestamp < run.window_end)
            .order_by(Sample.timestamp, Sample.id)
        ]
        for i, sid in enumerate(ids):
            blob, dim = vector_to_bytes(
                (rng.normal(size=8) + (6.0 if i < 2 else 0.0)).astype(np.float32)
            )
            s.add(Embedding(sample_id=sid, field="prompt", model="m", dim=dim, vector=blob))
        s.add(
            DriftResult(
                run_id=run.id,
                test="new_cluster",
                feature="prompt_embedding",
                segment="*",
                statistic=0.3,
                threshold=0.05,
                drifted=True,
                insufficient=False,
                detail={"clusters": [{"size": 2, "share": 0.33, "representatives": [0, 1]}]},
            )
        )
        s.commit()
        first_two = [s.get(Sample, sid).prompt for sid in ids[:2]]
    client = TestClient(create_app(make_settings(migrated_db), factory))
    html = client.get(f"/clusters/{data.drift_run_id}", headers=AUTH).text
    assert html.count('class="b"') == 30 and html.count('class="n"') == 2
    assert html.count('class="w"') == len(ids) - 2
    table = html.split('id="clusters"')[1].split("</table>")[0]
    assert "33.0 %" in table and all(f"<li>{p}</li>" in table for p in first_two)
    assert client.get("/clusters/999999", headers=AUTH).status_code == 404
