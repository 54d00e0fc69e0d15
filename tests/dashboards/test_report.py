"""The report builder on its own: the size bound holds even when Evidently's page would break it."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
from report_args import report_args

import dashboards.report.build as build
from dashboards.report.evidently_part import NUMERIC_FEATURES
from dashboards.report.render import evidently_path


def frame(seed: int, n: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    data = {c: rng.gamma(3.0, 10.0, n) for c in NUMERIC_FEATURES}
    start = datetime(2026, 11, 29, 10, tzinfo=UTC)
    data["timestamp"] = [
        (start + timedelta(seconds=int(s))).isoformat() for s in rng.integers(0, 3600, n)
    ]
    data["prompt"] = [f"question {i}" for i in range(n)]
    return pd.DataFrame(data)


def test_report_keeps_the_size_bound_and_is_shareable(tmp_path, monkeypatch):
    current, reference = frame(1), frame(2)
    evidently = build.evidently_part(current, reference, max_rows=1000, seed=0)
    assert evidently[0] is not None and len(evidently[0]) > 1_000_000  # the real page, JS bundle
    common = report_args(tmp_path, current, reference, run_id=7, evidently=evidently)
    full = build.write_run_report(**common)
    beside = evidently_path(full)  # Evidently's page, framed by the report
    assert "mean_logprob" in beside.read_text() and beside.stat().st_size <= build.MAX_REPORT_BYTES
    assert 'sandbox="allow-scripts"' in full.read_text()
    # Evidently's page comes folded under a plain summary: Vigil's sections lead
    folded = full.read_text().split('<details id="evidently-details"><summary>')[1]
    assert "Evidently" in folded.split("</summary>")[0]
    assert "<iframe" in folded.split("</details>")[0]
    assert oct(os.stat(full).st_mode & 0o777) == "0o600"  # it quotes prompts

    monkeypatch.setattr(build, "MAX_REPORT_BYTES", 1_000_000)  # a page that would not fit
    small = build.write_run_report(**{**common, "run_id": 8})
    text = small.read_text()
    assert small.stat().st_size < 1_000_000 and "Vigil drift report" in text
    assert "page left out" in text and "over the 1.0 MB bound" in text
    assert not evidently_path(small).exists() and "<iframe" not in text


def test_every_result_renders_whatever_its_fields_hold(tmp_path):
    """None/NaN/inf numbers, a result kind the template has no section for, odd detail and lone
    surrogates in logged text: the report is still written, as valid UTF-8."""
    current = frame(3, n=20)
    current.loc[0, "prompt"] = "lone \ud800 surrogate"
    odd = [
        {
            "test": t,
            "feature": "prompt_embedding",
            "segment": seg,
            "statistic": stat,
            "p_value": None,
            "threshold": None,
            "drifted": True,
            "insufficient": False,
            "detail": {
                "clusters": [{"size": None, "share": None, "representatives": [0, None, "x"]}]
            },
        }
        for t in ("new_cluster", "cluster_growth", "new_category", "mmd")
        for seg, stat in (("*", float("nan")), ("tenant=\udfff", float("inf")), ("*", None))
    ]
    current["prompt_embedding"] = [np.zeros(2)] * len(current)
    path = build.write_run_report(
        **report_args(tmp_path, current, frame(4, n=20), run_id=9, results=odd)
    )
    text = path.read_bytes().decode("utf-8")  # strict: no lone surrogate got through
    assert text.count('<tr class="drifted">') >= len(odd) and "\ufffd" in text
    assert "inf" in text and "–" in text


def test_pictures_skip_a_feature_no_float_axis_can_span():
    from dashboards.report.pictures import feature_pictures

    drifted = [{"test": "psi", "feature": "latency_ms", "drifted": True}]
    huge = pd.DataFrame({"latency_ms": [1e308, -1e308, 5.0]})
    assert feature_pictures(drifted, huge, huge) == []  # np.histogram raised ValueError here
    normal = pd.DataFrame({"latency_ms": [1.0, 2.0, 3.0]})
    assert len(feature_pictures(drifted, normal, normal)) == 2


def test_evidently_section_says_what_its_verdict_counts(tmp_path):
    """The note under Evidently's page gives the drifted-columns vote behind its "Dataset drift"
    line — checked against scipy's two-sample K-S on the same columns (Evidently's test for
    continuous columns at this size, p < 0.05) — and why it can differ from Vigil's verdict."""
    from scipy.stats import ks_2samp

    reference, current = frame(2), frame(1)
    for c in NUMERIC_FEATURES[:3]:
        current[c] = current[c] * 3.0  # three of eight columns move: under Evidently's half
    part = build.evidently_part(current, reference, max_rows=1000, seed=0)
    expected = sum(ks_2samp(reference[c], current[c]).pvalue < 0.05 for c in NUMERIC_FEATURES)
    assert part.verdict is not None and part.verdict.columns == len(NUMERIC_FEATURES)
    assert part.verdict.drifted == expected and part.verdict.drift_share == 0.5
    assert part.verdict.detected == (expected >= 4)
    path = build.write_run_report(
        **report_args(tmp_path, current, reference, run_id=11, evidently=part)
    )
    note = path.read_text().split('id="evidently-note">')[1].split("</p>")[0]
    assert (
        f"Here {expected} of {len(NUMERIC_FEATURES)}" in note
        and "at least 50 % of them drift" in note
    )
    assert "It is not Vigil's verdict" in note


def test_the_report_says_which_fields_no_sample_of_the_window_sent(tmp_path):
    """A window fed by OTLP spans (no log-probabilities) or vLLM's spans (no text either): the
    report names what was not sent and the tests that had nothing to judge."""
    current = frame(5, n=30)
    current["mean_logprob"] = np.nan
    current["mean_entropy"] = None
    current["response"] = "an answer"
    current.loc[3, "ttft_ms"] = np.nan  # one missing value is not "not sent"
    path = build.write_run_report(**report_args(tmp_path, current, frame(6, n=30), run_id=12))
    note = path.read_text().split('id="unsent">')[1].split("</p>")[0]
    assert "mean_logprob (log-probability)" in note and "mean_entropy (entropy)" in note
    assert "ttft_ms" not in note and "prompt" not in note and "response" not in note
    full = frame(7, n=30)
    full["response"] = "x"
    full["mean_logprob"], full["mean_entropy"] = -0.5, 1.0
    assert build.unsent_fields(full) == []
