"""Baselines: bounded frozen copy, validation (halves), calibration, persistence."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from drift_synth import make_samples

from drift.baseline.build import Baseline, build_baseline
from drift.baseline.calibrate import calibrate_baseline, chunk_bounds
from drift.baseline.validate import validate_baseline


@pytest.fixture(scope="module")
def clean_frame():
    return make_samples(1200, seed=1, span_s=7 * 86400)


def test_build_caps_with_a_seeded_sample_in_time_order(clean_frame):
    b1 = build_baseline(clean_frame, max_samples=500, seed=3)
    b2 = build_baseline(clean_frame, max_samples=500, seed=3)
    assert b1.n == 500 and b1.info["capped"] and b1.info["n_source"] == 1200
    assert np.array_equal(b1.rows, b2.rows)
    assert np.all(np.diff(b1.features.timestamps) >= 0)
    # the frozen rows are the source rows they claim to be
    src = clean_frame["prompt_tokens"].to_numpy()[b1.rows]
    assert np.array_equal(src, b1.features.numeric["prompt_tokens"])
    assert "prompt_embedding" in b1.frozen.clusters and len(b1.frozen.psi_edges["latency_ms"]) > 3


@pytest.mark.parametrize("seed", range(3))
def test_clean_baseline_is_validated(seed):
    b = build_baseline(make_samples(1000, seed=seed, span_s=86400), seed=seed)
    result = validate_baseline(b)
    assert result.valid, result.reasons
    assert b.status == "validated" and b.validation["valid"]


@pytest.mark.parametrize(
    "kind,expect",
    [
        ("prompt", "prompt_tokens"),
        ("operational", "ttft_ms"),
        ("persona", "prompt_embedding"),
        ("eval", "eval_score"),
        ("model", "response_embedding"),
    ],
)
def test_baseline_with_drift_between_halves_is_rejected(kind, expect):
    first = make_samples(500, seed=10, t0=1.7e9)
    second = make_samples(500, seed=11, t0=1.7e9 + 3600, drift=kind)
    frame = pd.concat([second, first], ignore_index=True)  # file order must not matter: time does
    b = build_baseline(frame, seed=0)
    result = validate_baseline(b)
    assert not result.valid and b.status == "rejected"
    assert any(expect in reason for reason in result.reasons), result.reasons


def test_too_small_baseline_is_rejected_with_reason():
    b = build_baseline(make_samples(60, seed=2), seed=0)
    result = validate_baseline(b)
    assert not result.valid and "too few samples" in result.reasons[0]


def test_calibration_never_goes_below_canonical_and_rises_with_real_noise():
    # i.i.d. baseline: thresholds stay at the canonical floors
    b = build_baseline(make_samples(1600, seed=4), seed=0)
    summary = calibrate_baseline(b, window_size=200)
    assert summary["chunks"] == 8 and summary["chunk_size"] == 200
    assert all(v >= 0.25 for v in b.levels.thresholds["psi"].values())
    assert b.levels.thresholds["psi"]["prompt_tokens"] == pytest.approx(0.25)
    assert not b.levels.effect_floors.get("ks")
    # a baseline whose hours wander (each chunk's latency shifted differently): PSI threshold
    # and a KS effect floor rise from that noise
    frame = make_samples(1600, seed=5)
    wobble = np.repeat(np.random.default_rng(0).normal(0, 0.6, 8), 200)
    frame["ttft_ms"] = frame["ttft_ms"] * np.exp(wobble)
    noisy = build_baseline(frame, seed=0)
    calibrate_baseline(noisy, window_size=200)
    assert noisy.levels.thresholds["psi"]["ttft_ms"] > 0.25
    assert noisy.levels.effect_floors["ks"]["ttft_ms"] > 0.1
    assert noisy.levels.thresholds["psi"]["prompt_tokens"] == pytest.approx(0.25)


def test_chunk_bounds():
    assert chunk_bounds(1000, 100, 10) == [(i * 100, i * 100 + 100) for i in range(10)]
    assert chunk_bounds(1000, 5000, 10) == [(0, 250), (250, 500), (500, 750), (750, 1000)]
    assert chunk_bounds(80, 20, 10) == []


def test_round_trip_through_json(clean_frame):
    b = build_baseline(clean_frame, seed=0)
    validate_baseline(b)
    calibrate_baseline(b, window_size=300)
    data = json.loads(json.dumps(b.to_dict()))
    again = Baseline.from_dict(data)
    assert again.status == b.status and again.levels == b.levels
    assert np.array_equal(again.rows, b.rows)
    for name in b.features.numeric:
        assert np.array_equal(
            again.features.numeric[name], b.features.numeric[name], equal_nan=True
        )
        assert np.array_equal(again.frozen.psi_edges[name], b.frozen.psi_edges[name])
    block, block2 = (
        b.features.embeddings["prompt_embedding"],
        again.features.embeddings["prompt_embedding"],
    )
    assert np.array_equal(block.vectors, block2.vectors) and np.array_equal(block.rows, block2.rows)
    c1, c2 = b.frozen.clusters["prompt_embedding"], again.frozen.clusters["prompt_embedding"]
    assert np.array_equal(c1.centroids, c2.centroids) and np.array_equal(c1.radii, c2.radii)
    # without the samples: storage passes them back in frozen order
    light = json.loads(json.dumps(b.to_dict(include_features=False)))
    assert "features" not in light
    again2 = Baseline.from_dict(light, features=b.features)
    assert again2.levels == b.levels
    with pytest.raises(ValueError, match="holds no features"):
        Baseline.from_dict(light)
