"""Response evidence summed across windows: the score's null, the CUSUM against a plain loop,
the calibrated ARL0, a persistent small change, the state round trip and the words."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drift.alerting.custom_rules import DEFAULT_RULES
from drift.alerting.proposals import propose_alerts, since_words
from drift.result import TestResult
from drift.streams.window_evidence import (
    WindowEvidence,
    accumulate,
    calibrate_evidence,
    evidence_z,
    null_scores,
)

B = 999


@pytest.fixture(scope="module")
def calibrated() -> WindowEvidence:
    return calibrate_evidence(arl0_windows=100, permutations=B)


def _fresh(template: WindowEvidence) -> WindowEvidence:
    return WindowEvidence.from_dict(template.to_dict())


def test_null_scores_are_standard_normal_and_fall_with_p():
    z = null_scores(B)
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1.0) < 0.02
    assert np.all(np.diff(z) < 0)  # p grows along the grid
    assert evidence_z(0.001, B) == pytest.approx(z[0])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, B + 1), min_size=1, max_size=60))
def test_alarms_and_first_seen_match_a_plain_loop(calibrated, ranks):
    ev = _fresh(calibrated)
    det = ev.detector
    s_up = s_down = 0.0
    since = 0
    for r in ranks:
        p = r / (B + 1)
        z = (evidence_z(p, B) - det.center[0]) / det.scale[0]
        s_up, s_down = max(0.0, s_up + z - det.k), max(0.0, s_down - z - det.k)
        since = since + 1 if s_up > 0 else 0
        res = ev.update(p)
        up_alarm = s_up > det.h
        assert res.drifted == up_alarm
        if up_alarm:
            assert res.detail["first_seen_windows_ago"] == since - 1
        if s_up > det.h or s_down > det.h:
            s_up = s_down = 0.0
            since = 0
        assert ev.level == pytest.approx(s_up)


def test_false_alarms_keep_the_calibrated_arl(calibrated):
    """Null windows (p uniform on the permutation grid): windows per false alarm near 100."""
    rng = np.random.default_rng(0)
    ev = _fresh(calibrated)
    n = 12_000
    alarms = sum(ev.update(r / (B + 1)).drifted for r in rng.integers(1, B + 2, n))
    # down alarms restart the sums too, so up alarms alone come a little less often than ARL0
    assert 40 <= alarms <= 130, alarms  # ARL0 = 100: about 120 alarms of either side


def test_a_persistent_small_change_alarms_and_dates_itself(calibrated):
    """Windows whose p sits near 0.05 (never below a 0.001 threshold): an alarm within a few
    windows, dated back to the first changed window."""
    rng = np.random.default_rng(1)
    ev = _fresh(calibrated)
    for r in rng.integers(1, B + 2, 30):
        ev.update(r / (B + 1))
    ev = WindowEvidence.from_dict(ev.to_dict())  # the state survives between runs
    fired = None
    for i in range(12):
        res = ev.update(float(rng.uniform(0.02, 0.08)))
        if res.drifted:
            fired = (i, res.detail["first_seen_windows_ago"])
            break
    assert fired is not None and fired[0] <= 6
    assert fired[0] - 2 <= fired[1] <= fired[0] + 3  # a few null windows may lead into it


def _agg(p, segment="*", insufficient=False):
    return TestResult(
        "response_agg", 3.0, p, 0.001, False, insufficient=insufficient, segment=segment
    )


def test_accumulate_reads_only_the_whole_window(calibrated):
    ev = _fresh(calibrated)
    [res] = accumulate(ev, [_agg(0.9, segment="tenant=a"), _agg(0.004)])
    assert res.detail["window_p"] == 0.004 and res.feature == "responses"
    assert accumulate(ev, [_agg(None), _agg(0.01, insufficient=True)]) == []


def test_an_alarm_becomes_a_model_alert_that_says_since_when():
    hit = TestResult(
        "response_evidence", 6.2, None, 5.1, True, feature="responses",
        detail={"first_seen_windows_ago": 3, "windows": 4},
    )  # fmt: skip
    [alert] = propose_alerts([hit], DEFAULT_RULES, {"*": {"n_current": 300}})
    assert alert.rule == "response_shift_building" and alert.kind == "model"
    assert "first seen 3 windows ago" in alert.summary
    assert since_words({"first_seen_windows_ago": 1}) == "first seen 1 window ago"
    assert since_words({"first_seen_windows_ago": 0}) == "first seen in this window"
