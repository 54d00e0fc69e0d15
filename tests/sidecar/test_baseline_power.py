"""Validating a stored baseline measures what each test can detect at the window size and keeps
it in the baseline's spec, from which the drift Baseline and the baselines page read it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from traffic_gen import traffic

from dashboards.baselines_page import baseline_rows
from drift.baseline.power_report import PowerReport
from sidecar.jobs.baselines import (
    build_baseline_from_window,
    load_baseline,
    validate_stored_baseline,
)
from storage.db import session_factory
from storage.repositories.baselines import get_baseline
from storage.repositories.samples import insert_samples


# a whole pipeline on one backend; the storage tests cover both
@pytest.mark.parametrize("migrated_db", ["sqlite"], indirect=True)
def test_validation_stores_the_detectable_effects(migrated_db, make_settings, embedder):
    settings = make_settings(migrated_db, baseline_power=True, drift_interval_s=3600)
    factory = session_factory(migrated_db)
    now = datetime.now(UTC)
    start, end = now - timedelta(hours=5), now - timedelta(hours=1)
    with factory() as s:
        insert_samples(s, traffic(start, end, 240, seed=5))
        s.commit()
    built = build_baseline_from_window(settings, factory, start, end, now=now)
    checked = validate_stored_baseline(settings, factory, built.baseline_id, now=now)
    assert checked.valid, checked.reasons
    with factory() as s:
        spec = get_baseline(s, built.baseline_id).spec
        report = PowerReport.from_dict(spec["power"])
        assert report.window_size == checked.window_size == 60  # 240 samples over 4 hours
        tested = {(e.test, e.feature) for e in report.effects}
        assert {("ks", "completion_tokens"), ("chi2", "finish_reason")} <= tested
        assert ("mmd", "response_embedding") in tested
        assert load_baseline(s, built.baseline_id).power == spec["power"]
        (row,) = [r for r in baseline_rows(s, now) if r["id"] == built.baseline_id]
    per_feature, every_test = row["power"]
    assert len(every_test) == len(report.effects) + 1  # and the tests it left out
    assert any("response length" in line and "window of 60 samples" in line for line in per_feature)
