"""The report's histograms survive values floats cannot split into 20 bins: equal values, or
values an ulp or so apart, as rounded timings often are. numpy's own bin edges raise "Too many
bins for data range" on them, which failed the whole report whenever such a feature drifted."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from report_args import report_args

import dashboards.report.build as build
from dashboards.report.pictures import BINS, bin_edges, histogram_svg


def test_a_drifted_feature_an_ulp_wide_still_gets_its_report(tmp_path):
    reference = pd.DataFrame({"tpot_ms": [0.3] * 30})
    window = pd.DataFrame({"tpot_ms": [0.1 + 0.2] * 30})  # 0.30000000000000004
    drifted = [{"test": "ks", "feature": "tpot_ms", "segment": "*", "statistic": 1.0,
                "p_value": 0.0, "threshold": 0.1, "drifted": True, "insufficient": False,
                "detail": {}}]  # fmt: skip
    path = build.write_run_report(
        **report_args(tmp_path, window, reference, run_id=4, results=drifted)
    )
    assert "tpot_ms: histogram" in path.read_text()


finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(finite, min_size=1, max_size=30), st.lists(finite, min_size=1, max_size=30))
def test_bin_edges_always_increase_and_hold_every_value(ref, cur):
    values = np.array(ref + cur)
    edges = bin_edges(values)
    assert len(edges) == BINS + 1 and np.all(np.diff(edges) > 0)
    assert edges[0] <= values.min() and values.max() <= edges[-1]
    assert histogram_svg(np.array(ref), np.array(cur)).startswith("<svg")
