"""The drift job's response evidence across windows (drift.streams.window_evidence), kept in
`job_cursors` as JSON: loaded before a scheduled window, saved in the transaction that makes the
window done (a crash before it leaves the sums as they were). A new active baseline, or a
changed ARL0, starts afresh; calibration is a bootstrap of a known null, done once per start."""

from __future__ import annotations

import json
import logging
from datetime import datetime

from sqlalchemy.orm import Session

from drift.stattests.response_agg import N_PERMUTATIONS
from drift.streams.window_evidence import WindowEvidence, calibrate_evidence
from sidecar.cursors import get_cursor, set_cursor
from vigil.config import Settings

log = logging.getLogger("vigil.sidecar.drift")

CURSOR = "response_evidence"


def load_evidence(session: Session, baseline_id: int, settings: Settings) -> WindowEvidence:
    raw = get_cursor(session, CURSOR)
    if raw:
        try:
            kept = WindowEvidence.from_dict(json.loads(raw))
            if (
                kept.baseline_id == baseline_id
                and kept.detector.arl0 == settings.drift_evidence_arl0_windows
            ):
                return kept
        except (ValueError, KeyError, TypeError):
            log.warning("response evidence state unreadable; starting afresh")
    return calibrate_evidence(
        arl0_windows=settings.drift_evidence_arl0_windows,
        permutations=N_PERMUTATIONS,
        baseline_id=baseline_id,
    )


def save_evidence(session: Session, evidence: WindowEvidence, now: datetime) -> None:
    set_cursor(session, CURSOR, json.dumps(evidence.to_dict()), now)
