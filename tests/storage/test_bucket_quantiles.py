"""Per-bucket percentiles in one vectorised pass, against numpy.percentile bucket by bucket."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.repositories.bucket_quantiles import bucket_quantiles

VALUES = st.one_of(st.floats(min_value=-1e6, max_value=1e6), st.just(np.nan), st.just(np.inf))


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(-2, 7), VALUES), max_size=60),
    qs=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4),
    n=st.integers(0, 6),
)
def test_matches_numpy_per_bucket(rows, qs, n):
    idx = np.array([r[0] for r in rows], dtype=np.int64)
    values = np.array([r[1] for r in rows], dtype=np.float64)
    got = bucket_quantiles(idx, values, n, qs)
    assert got.shape == (len(qs), n)
    for b in range(n):
        inside = values[(idx == b) & np.isfinite(values)]
        if inside.size == 0:
            assert np.isnan(got[:, b]).all()
        else:
            want = np.percentile(inside, [100 * q for q in qs])
            assert got[:, b] == pytest.approx(want, rel=1e-9, abs=1e-6)


def test_interpolates_between_neighbours():
    got = bucket_quantiles(
        np.array([0, 0, 0, 0, 1]), np.array([4.0, 1.0, 3.0, 2.0, 9.0]), 3, (0.5, 0.95)
    )
    assert got[:, 0] == pytest.approx([2.5, 3.85])
    assert got[:, 1] == pytest.approx([9.0, 9.0])
    assert np.isnan(got[:, 2]).all()
