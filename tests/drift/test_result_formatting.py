"""Every result of every test formats and serialises, whatever its fields hold.

The alert summary once formatted each drifted result with `threshold:.3g`, and cluster growth
reports no threshold: the drift job crashed on every window where a small cluster grew.
"""

from __future__ import annotations

import itertools
import json
import math
from datetime import UTC, datetime

import numpy as np
import pytest

from drift.alerting.custom_rules import DEFAULT_RULES, Rule
from drift.alerting.proposals import describe_hit, propose_alerts
from drift.baseline.validate import describe
from drift.formatting import clean_text, fmt_num
from drift.outcome import DriftOutcome
from drift.registry import all_tests
from drift.result import TestResult

EXTRA_TESTS = (
    "new_cluster",
    "cluster_growth",
    "eval_trend",
    "new_category",
    "segment_size",
    "new_prompt_template",
)
ODD_VALUES = (None, float("nan"), float("inf"), float("-inf"), np.float32(0.5))
EVERYTHING = [
    Rule("all", test, ("*",), "review", "persona")
    for test in sorted({s.name for s in all_tests()} | set(EXTRA_TESTS))
]


def test_cluster_growth_without_a_threshold_makes_an_alert_summary():
    grown = TestResult(
        "cluster_growth",
        3.0,
        1e-5,
        None,
        True,
        feature="prompt_embedding",
        detail={"grown": [{"cluster": 2, "baseline_share": 0.05, "window_share": 0.15}]},
    )
    alerts = propose_alerts([grown], DEFAULT_RULES)
    assert [a.rule for a in alerts] == ["cluster_growth"]
    assert alerts[0].summary == "a small group in what prompts ask grew 3x [all traffic]"
    assert alerts[0].evidence["results"][0]["p_value"] == 1e-05  # statistics: in the evidence


def test_fmt_num_against_format():
    assert fmt_num(None) == fmt_num(float("nan")) == "n/a"
    assert (fmt_num(float("inf")), fmt_num(-np.inf)) == ("inf", "-inf")
    assert fmt_num(1e308) == "1e+308"
    for x in (0.0, -1.5, 123456.789, 1e-12, np.float32(0.25), 7):
        assert fmt_num(x) == format(float(x), ".3g")
        assert fmt_num(x, ".1%") == format(float(x), ".1%")
    assert fmt_num("text") == "text" and fmt_num(1e300, ".0%") == "1e+302%"


def test_clean_text_replaces_only_lone_surrogates():
    assert clean_text("plain é 😀") == "plain é 😀"
    assert clean_text("a\ud800b\udfffc") == "a\ufffdb\ufffdc"
    clean_text("x\udc80").encode("utf-8")  # encodable afterwards


@pytest.mark.parametrize("test", [r.test for r in EVERYTHING])
def test_every_result_formats_and_serialises(test):
    results = [
        TestResult(
            test,
            stat,
            p,
            thr,
            drifted,
            insufficient=insufficient,
            detail={
                "x": stat,
                "arr": np.array([1.0, np.nan]),
                "new": [
                    {
                        "value": "m\ud800",
                        "template": "t\ud800 …",
                        "share": stat,
                        "count": 20,
                        "big": True,
                    },
                    {"value": None},
                    "junk",
                ],
                "moved": [
                    {"ngram": "s\ud800x", "baseline_share": stat, "window_share": p},
                    {"ngram": None},
                    "junk",
                ],
            },
            feature="f\ud800",
            segment="*" if drifted else "tenant=a\udfff",
        )
        for (stat, p, thr), drifted, insufficient in itertools.product(
            itertools.product(ODD_VALUES, repeat=3), (True, False), (False, True)
        )
    ]
    for r in results:
        line = describe_hit(r)
        assert isinstance(line, str) and line
        line.encode("utf-8")
        assert describe(r).startswith(f"{r.test} on ")
        as_json = json.dumps(r.to_dict(), allow_nan=False)
        back = json.loads(as_json)
        for key in ("statistic", "p_value", "threshold"):
            value = getattr(r, key)
            expected = float(value) if value is not None and math.isfinite(value) else None
            assert back[key] == expected
    alerts = propose_alerts(results, EVERYTHING)
    assert alerts and all(a.summary for a in alerts)
    report = DriftOutcome(results=results, alerts=alerts, segments={}, baseline_valid=True)
    json.dumps(report.to_dict(full=True), allow_nan=False)
    for a in alerts:
        a.summary.encode("utf-8")


def test_every_result_is_stored(migrated_db):
    """The drift job's rows: NaN/inf become NULL, numpy values plain numbers (SQLite and PG)."""
    from storage.db import session_factory
    from storage.repositories.drift_runs import (
        DriftResultRow,
        add_drift_results,
        get_drift_results,
        start_drift_run,
    )

    results = [
        TestResult(
            test,
            stat,
            p,
            None,
            True,
            detail={"v": stat, "arr": np.array([stat or 0.0])},
            feature="f",
            segment="*",
        ).to_dict()
        for test in ("cluster_growth", "psi")
        for stat in ODD_VALUES
        for p in (None, float("nan"))
    ]
    factory = session_factory(migrated_db)
    with factory() as s:
        run = start_drift_run(
            s, datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 1, tzinfo=UTC)
        )
        add_drift_results(s, run.id, [DriftResultRow(
            test=r["test"], feature=r["feature"], segment=r["segment"], statistic=r["statistic"],
            p_value=r["p_value"], threshold=r["threshold"], drifted=r["drifted"],
            insufficient=r["insufficient"], detail=r["detail"]) for r in results])  # fmt: skip
        s.commit()
        stored = get_drift_results(s, run.id)
    assert len(stored) == len(results)
    expected = sorted((r["test"], r["statistic"] is None) for r in results)
    assert sorted((row.test, row.statistic is None) for row in stored) == expected
    assert all(row.p_value is None and row.threshold is None for row in stored)
