"""The response evidence kept between drift windows: saved, read back, restarted per baseline."""

from __future__ import annotations

from datetime import UTC, datetime

from sidecar.jobs.window_evidence import load_evidence, save_evidence
from vigil.config import Settings

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_state_survives_and_a_new_baseline_or_arl_starts_afresh(db_session):
    settings = Settings(drift_evidence_arl0_windows=50)
    fresh = load_evidence(db_session, 7, settings)
    assert fresh.level == 0 and fresh.baseline_id == 7 and fresh.detector.arl0 == 50
    for p in (0.2, 0.1):  # below h: the sums stay
        fresh.update(p)
    save_evidence(db_session, fresh, NOW)
    db_session.commit()
    again = load_evidence(db_session, 7, settings)
    assert again.level > 0 and again.level == fresh.level
    assert again.first_seen == 2
    assert load_evidence(db_session, 8, settings).level == 0  # another baseline
    other = Settings(drift_evidence_arl0_windows=100)
    assert load_evidence(db_session, 7, other).level == 0  # another false-alarm target
