"""Report pictures: histogram bars match numpy's densities, ECDFs end at 1, every SVG is
well-formed XML whatever the numbers, and the written report carries them inline."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from report_args import report_args

import dashboards.report.build as build
from dashboards.report.pictures import (
    BINS,
    PAD,
    H,
    ecdf_svg,
    histogram_svg,
    report_pictures,
    within_quantiles,
)

SVG = "{http://www.w3.org/2000/svg}"


def test_histogram_bars_are_the_densities():
    rng = np.random.default_rng(0)
    ref, cur = rng.normal(0, 1, 500), rng.normal(1.5, 1, 300)
    root = ET.fromstring(histogram_svg(ref, cur))
    heights = {
        k: [float(r.get("height")) for r in root.iter(f"{SVG}rect") if r.get("class") == f"bar{k}"]
        for k in (0, 1)
    }
    edges = np.histogram_bin_edges(np.concatenate([ref, cur]), bins=BINS)
    dens = [np.histogram(x, bins=edges)[0] / len(x) for x in (ref, cur)]
    scale = (H - 2 * PAD) / max(d.max() for d in dens)
    for k in (0, 1):
        assert np.allclose(heights[k], dens[k] * scale, atol=0.06)  # one decimal in the SVG


def test_ecdf_climbs_to_one():
    root = ET.fromstring(ecdf_svg(np.array([1.0, 2.0, 3.0]), np.array([2.0, 5.0])))
    for line in root.iter(f"{SVG}polyline"):
        ys = [float(p.split(",")[1]) for p in line.get("points").split()]
        assert ys == sorted(ys, reverse=True) and abs(ys[-1] - PAD) < 0.1  # y grows upwards in SVG


finite = arrays(np.float64, st.integers(2, 60), elements=st.floats(-1e9, 1e9, allow_nan=False))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(ref=finite, cur=finite)
def test_any_numbers_give_well_formed_svg(ref, cur):
    for svg in (histogram_svg(ref, cur), ecdf_svg(ref, cur)):
        ET.fromstring(svg)


def test_report_draws_drifted_features_inline(tmp_path):
    rng = np.random.default_rng(1)
    ref = pd.DataFrame(
        {
            "prompt_tokens": rng.gamma(3, 10, 200),
            "prompt": ["q"] * 200,
            "prompt_embedding": list(rng.normal(size=(200, 6))),
        }
    )
    cur = pd.DataFrame(
        {
            "prompt_tokens": rng.gamma(6, 10, 150),
            "prompt": ["q"] * 150,
            "prompt_embedding": list(rng.normal(1, 1, size=(150, 6))),
        }
    )
    results = [
        {
            "test": "psi",
            "feature": "prompt_tokens",
            "segment": "*",
            "statistic": 0.5,
            "p_value": None,
            "threshold": 0.2,
            "drifted": True,
            "insufficient": False,
            "detail": {},
        },
        {
            "test": "psi",
            "feature": "latency_ms",
            "segment": "*",
            "statistic": 0.01,
            "p_value": None,
            "threshold": 0.2,
            "drifted": False,
            "insufficient": False,
            "detail": {},
        },
    ]
    pictures = report_pictures(results, ref, cur)
    assert [p.title.split(" (1st")[0] for p in pictures] == [
        "prompt_tokens: histogram",
        "prompt_tokens: ECDF",
        "prompt embeddings (PCA; baseline grey, window blue)",
    ]
    assert "principal component" in pictures[-1].svg and "this window" in pictures[-1].svg
    path = build.write_run_report(
        **report_args(
            tmp_path, cur, ref, run_id=3, results=results,
            segment_sizes={"*": {"n_current": 150}},
        )
    )  # fmt: skip
    text = path.read_text()
    assert "What moved, drawn" in text and text.count("<svg") >= 3
    assert not re.search(
        r"""(src|href)=["']https?://(?!x/)""", text
    )  # self-contained: nothing fetched


def test_an_outlier_does_not_flatten_the_histogram():
    rng = np.random.default_rng(2)
    ref, cur = rng.normal(100, 10, 400), np.append(rng.normal(130, 10, 300), [1e7, 2e7])
    clipped_ref, clipped_cur, beyond = within_quantiles(ref, cur)
    lo, hi = np.quantile(np.concatenate([ref, cur]), [0.01, 0.99])  # the oracle's range
    assert clipped_cur.max() == hi and clipped_ref.min() >= lo and beyond >= 2
    edges = np.histogram_bin_edges(np.concatenate([clipped_ref, clipped_cur]), bins=BINS)
    filled = np.histogram(clipped_cur, bins=edges)[0]
    assert (filled > 0).sum() >= BINS // 3  # the bulk spreads over the bins, not one bar
