"""The report builder on its own: the size bound holds even when Evidently's page would break it."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd

import dashboards.report.build as build
from dashboards.report.evidently_part import NUMERIC_FEATURES


def frame(seed: int, n: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    data = {c: rng.gamma(3.0, 10.0, n) for c in NUMERIC_FEATURES}
    start = datetime(2026, 11, 29, 10, tzinfo=UTC)
    data["timestamp"] = [(start + timedelta(seconds=int(s))).isoformat() for s in rng.integers(0, 3600, n)]
    data["prompt"] = [f"question {i}" for i in range(n)]
    return pd.DataFrame(data)


def test_report_keeps_the_size_bound_and_is_shareable(tmp_path, monkeypatch):
    current, reference = frame(1), frame(2)
    evidently = build.evidently_part(current, reference, max_rows=1000, seed=0)
    assert evidently[0] is not None and len(evidently[0]) > 1_000_000  # the real page, JS bundle
    common = dict(run_id=7, window=(datetime(2026, 11, 29, 10, tzinfo=UTC), datetime(2026, 11, 29, 11, tzinfo=UTC)),
                  now=datetime.now(UTC), frame=current, baseline_row=None, baseline_frame=reference,
                  results=[], segment_sizes={"*": {"n_current": 200}}, alerts=[], report_dir=tmp_path,
                  public_url="http://x", evidently=evidently)  # fmt: skip
    full = build.write_run_report(**common)
    assert "DataDrift" in full.read_text() and full.stat().st_size <= build.MAX_REPORT_BYTES
    assert oct(os.stat(full).st_mode & 0o777) == "0o644"

    monkeypatch.setattr(build, "MAX_REPORT_BYTES", 1_000_000)  # a page that would not fit
    small = build.write_run_report(**{**common, "run_id": 8})
    text = small.read_text()
    assert small.stat().st_size < 1_000_000 and "Vigil drift report" in text
    assert "page left out" in text and "over the 1.0 MB bound" in text
