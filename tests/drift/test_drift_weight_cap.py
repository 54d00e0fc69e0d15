"""No row steers the whole-window ("*") tests through its weight: thinning caps each weight at
20x the median (and keeps at least min(n, 100) rows), so one sample of weight 1e6, or a tenant
claiming more than its traffic share, can neither make "*" insufficient nor hide a drift."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_drift_weights import OPTS, star, stratum

from drift.baseline.build import build_baseline
from drift.features.weights import MIN_KEPT_ROWS, ROW_WEIGHT_CAP, capped_weights, thinning_rows
from drift.run import run_drift


def window(seed: int, parts: list[tuple[str, int, float, bool]]) -> pd.DataFrame:
    """Tenants (name, rows, weight, drifted): a drifted tenant asks longer prompts, slower."""
    rng = np.random.default_rng(seed)
    frames = []
    for name, n, weight, drifted in parts:
        frame = stratum(rng, "A", n, weight).assign(tenant=name)
        if drifted:
            frame["prompt_tokens"] = rng.poisson(70, n)
            frame["latency_ms"] = rng.gamma(5.0, 40.0, n)
        frames.append(frame)
    frame = pd.concat(frames, ignore_index=True)
    return frame.iloc[rng.permutation(len(frame))].reset_index(drop=True)


@pytest.fixture(scope="module")
def baseline():
    return build_baseline(window(100, [("acme", 2000, 10.0, False)]), seed=0, cluster=False)


def test_one_heavy_sample_cannot_make_the_whole_window_insufficient(baseline):
    """Was: pi = w / max(w) kept ~1 row of 5,001 and every "*" test was insufficient."""
    cur = window(7, [("acme", 5000, 10.0, True), ("mallory", 1, 1e6, False)])
    res = star(run_drift(baseline, cur, segment_by=[], rng_seed=7, options=OPTS))
    assert res, "every '*' test came back insufficient"
    detail = res[0].detail
    assert detail["n_capped_current"] == 1 and detail["n_resampled_current"] >= 250
    assert any(r.drifted for r in res if r.test in ("ks", "psi")), res  # acme's drift is seen


def test_a_tenant_above_its_traffic_share_cannot_hide_a_drift(baseline):
    """mallory sends a fifth of the rows, undrifted, each claiming a million requests (ingest
    would clip them to 10x the engine's 1/rate; the cap holds without that too). Was: thinning
    kept mallory's 1,000 rows and 0.4 of acme's, and acme's drift vanished from "*"."""
    cur = window(8, [("acme", 4000, 10.0, True), ("mallory", 1000, 1e6, False)])
    res = star(run_drift(baseline, cur, segment_by=[], rng_seed=8, options=OPTS))
    assert any(r.drifted for r in res if r.test == "ks"), res
    assert res[0].detail["n_capped_current"] == 1000


def test_ordinary_weights_are_left_as_they_are():
    w = np.r_[np.full(800, 10.0), np.full(1000, 2.0)]  # a base rate and an over-sampled segment
    assert np.array_equal(capped_weights(w), w)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(1e-3, 1e6), min_size=1, max_size=400))
def test_capped_weights_bound_each_row_and_keep_enough_rows(values):
    w = np.asarray(values)
    capped = capped_weights(w)
    assert np.all(capped <= w) and np.all(capped > 0)
    assert capped.max() <= ROW_WEIGHT_CAP * np.median(w) * (1 + 1e-9)
    expected_kept = capped.sum() / capped.max()
    assert expected_kept >= min(w.size, MIN_KEPT_ROWS) * (1 - 1e-6)
    # unchanged where nothing is out of bounds
    if w.max() <= ROW_WEIGHT_CAP * np.median(w) and w.sum() / w.max() >= min(w.size, MIN_KEPT_ROWS):
        assert np.array_equal(capped, w)


def test_thinning_after_the_cap_keeps_the_promised_rows():
    rng = np.random.default_rng(3)
    w = np.r_[np.full(5000, 10.0), [1e6]]
    kept = thinning_rows(capped_weights(w), rng)
    assert 5000 // ROW_WEIGHT_CAP <= kept.size <= 5001 and 5000 in kept  # the heavy row stays, once
