"""Numeric drift results carry both sides' medians and means (finite values only), checked
against Python's statistics module."""

from __future__ import annotations

import math
import statistics

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from drift.battery import central_values

VALUES = st.lists(
    st.one_of(st.floats(-1e6, 1e6), st.just(math.nan), st.just(math.inf)), max_size=40
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(ref=VALUES, cur=VALUES)
def test_central_values_match_an_oracle(ref, cur):
    out = central_values(np.array(ref, dtype=float), np.array(cur, dtype=float))
    for side, values in (("reference", ref), ("window", cur)):
        finite = [v for v in values if math.isfinite(v)]
        if not finite:
            assert f"{side}_median" not in out and f"{side}_mean" not in out
            continue
        assert math.isclose(out[f"{side}_median"], statistics.median(finite), abs_tol=1e-9)
        assert math.isclose(
            out[f"{side}_mean"], statistics.fmean(finite), rel_tol=1e-9, abs_tol=1e-6
        )
