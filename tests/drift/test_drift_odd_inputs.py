"""No input crashes the drift code: odd windows and references (tests/support/odd_windows.py)
through `vigil check`, the drift job's core (run_drift -> propose_alerts) and the report
renderer. Each yields results or an InputError whose message says what is wrong — never
another exception. Hypothesis, seeded and bounded (a few seconds each on a busy box)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from odd_windows import QUIRKS, fake_embed, odd_pair, write_records

from dashboards.report.build import write_run_report
from drift.alerting.custom_rules import DEFAULT_RULES
from drift.alerting.proposals import propose_alerts
from drift.baseline.build import build_baseline
from drift.detectors.new_values import new_values_test
from drift.errors import InputError
from drift.features.segments import DEFAULT_SEGMENT_BY
from drift.run import run_drift
from vigil.cli.check import EXIT_BAD_INPUT, EXIT_DRIFT, EXIT_NO_VERDICT, EXIT_OK, check_command

FUZZ = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
quirk_sets = st.frozensets(st.sampled_from(QUIRKS), max_size=4)
seeds = st.integers(0, 2**16)


def _frame_input_error_expected(quirks: frozenset[str]) -> bool:
    """Frames: only vectors of two dimensions in one window are unusable (one_row cuts the odd
    one)."""
    return "mixed_dims" in quirks and "one_row" not in quirks


def _file_input_error_expected(quirks: frozenset[str]) -> bool:
    """Files are checked line by line against the record schema: empty vectors, NaN/inf,
    out-of-bounds numbers and lone surrogates are refused there too."""
    return _frame_input_error_expected(quirks) or bool(
        quirks & {"empty_embeddings", "nan_numbers", "huge_numbers", "surrogates"}
    )


def _encodable(text: str) -> None:
    text.encode("utf-8")  # raises on a lone surrogate


@FUZZ
@given(seed=seeds, quirks=quirk_sets)
def test_drift_job_core_and_report_take_any_window(seed, quirks):
    ref, cur = odd_pair(seed, quirks)
    try:
        baseline = build_baseline(pd.DataFrame(ref), seed=seed)
        window = pd.DataFrame(cur)
        report = run_drift(baseline, window, segment_by=DEFAULT_SEGMENT_BY, rng_seed=seed)
    except InputError as exc:
        assert _frame_input_error_expected(quirks), f"{quirks}: {exc}"
        assert "prompt_embedding" in str(exc) and "values" in str(exc)
        return
    assert not _frame_input_error_expected(quirks)
    assert report.results and report.segments["*"]["n_current"] == len(cur)
    alerts = propose_alerts(report.results, DEFAULT_RULES)
    assert {a.rule for a in alerts} == {a.rule for a in report.alerts}  # kinds may be attributed
    for a in alerts:
        _encodable(a.summary)
    as_json = json.dumps(report.to_dict(full=True), allow_nan=False)
    _encodable(as_json)
    if "new_category" in quirks and "one_row" not in quirks:
        model = [a for a in alerts if a.rule == "new_model_version"]
        assert (
            model and model[0].kind == "model" and "new model version m2: 100%" in model[0].summary
        )

    results = [r.to_dict() for r in report.results]
    fired = [
        SimpleNamespace(
            id=i + 1, **{k: getattr(a, k) for k in ("rule", "severity", "segment", "summary")}
        )
        for i, a in enumerate(alerts)
    ]
    with tempfile.TemporaryDirectory() as out:
        path = write_run_report(
            run_id=seed,
            window=(datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 1, tzinfo=UTC)),
            now=datetime(2026, 1, 1, 1, tzinfo=UTC),
            frame=window,
            baseline_row=None,
            baseline_frame=pd.DataFrame(ref),
            results=results,
            segment_sizes=report.segments,
            alerts=fired,
            report_dir=Path(out),
            public_url="http://x",
            evidently=(None, "skipped"),
        )
        page = path.read_text(encoding="utf-8")
    assert "Vigil drift report" in page and page.count("<tr") >= len(results)


@settings(FUZZ, max_examples=20)  # each full run builds, validates and calibrates a baseline
@given(seed=seeds, quirks=quirk_sets, as_json=st.booleans())
def test_vigil_check_takes_any_pair_of_files(seed, quirks, as_json):
    ref, cur = odd_pair(seed, quirks)
    with tempfile.TemporaryDirectory() as tmp:
        ref_path = write_records(ref, Path(tmp) / "ref.jsonl")
        cur_path = write_records(cur, Path(tmp) / "cur.jsonl")
        args = argparse.Namespace(
            reference=str(ref_path),
            current=str(cur_path),
            json=as_json,
            segment_by=["tenant"],
            seed=seed,
        )
        out, err = io.StringIO(), io.StringIO()
        with (
            mock.patch("sidecar.embedder.embed_texts", fake_embed),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            code = check_command(args)
    if _file_input_error_expected(quirks):
        assert code == EXIT_BAD_INPUT, (quirks, out.getvalue())
        assert err.getvalue().startswith("vigil check: ") and ".jsonl" in err.getvalue()
        return
    assert code in (EXIT_OK, EXIT_DRIFT, EXIT_NO_VERDICT), (quirks, err.getvalue())
    # "could not judge" says why on stderr
    assert (code == EXIT_NO_VERDICT) == ("could not judge" in err.getvalue()), err.getvalue()
    _encodable(out.getvalue())
    if code == EXIT_NO_VERDICT:  # a rejected reference or too few samples: no verdict to match
        return
    if as_json:
        report = json.loads(out.getvalue())
        assert report["results"] and (code == EXIT_DRIFT) == report["drifted"]
    else:
        assert ("DRIFT:" in out.getvalue()) == (code == EXIT_DRIFT)


@pytest.mark.parametrize("quirk", ["mixed_dims"])
def test_input_error_names_the_row_and_field(quirk):
    ref, cur = odd_pair(1, {quirk})
    baseline = build_baseline(pd.DataFrame(ref), seed=1, cluster=False)
    with pytest.raises(InputError, match=r"row 59: prompt_embedding has 11 values, row 0 has 8"):
        run_drift(baseline, pd.DataFrame(cur))


def test_a_small_cluster_that_grows_makes_an_alert():
    """The window shape that crashed the job: cluster growth is drifted and has no threshold."""
    ref, cur = odd_pair(2, {"cluster_grows"})
    report = run_drift(build_baseline(pd.DataFrame(ref), seed=1), pd.DataFrame(cur), segment_by=[])
    growth = report.results_for(test="cluster_growth", segment="*")[0]
    assert growth.drifted and growth.threshold is None
    alert = next(a for a in report.alerts if a.rule == "cluster_growth")
    assert "a small group in what prompts ask grew" in alert.summary and alert.kind == "persona"


def test_a_new_model_version_is_named_with_its_share_kind_and_severity():
    ref, cur = odd_pair(4, {"new_category"})
    report = run_drift(
        build_baseline(pd.DataFrame(ref), seed=1, cluster=False), pd.DataFrame(cur), segment_by=[]
    )
    [result] = report.results_for(test="new_category", feature="model_version")
    assert result.drifted and result.statistic == 1.0 and result.detail["new"][0]["value"] == "m2"
    [alert] = [
        a for a in propose_alerts(report.results, DEFAULT_RULES) if a.rule == "new_model_version"
    ]
    assert alert.kind == "model" and alert.severity == "high"
    assert alert.summary.startswith("new model version m2: 100% of the window")
    [tool] = report.results_for(test="new_category", feature="tool")
    assert tool.drifted and [v["value"] for v in tool.detail["new"]] == ["browser"]


values = st.lists(
    st.one_of(st.none(), st.sampled_from(["a", "b", "c", "d", "\ud800"])), max_size=40
)


@settings(max_examples=50, deadline=None, derandomize=True, database=None)
@given(reference=values, current=values, weighted=st.booleans())
def test_new_values_against_a_counting_oracle(reference, current, weighted):
    w = np.arange(1, len(current) + 1, dtype=float) if weighted else None
    res = new_values_test(
        np.array(reference, dtype=object),
        np.array(current, dtype=object),
        weights=w,
        min_share=0.2,
        min_count=2,
    )
    if not current:
        assert res.insufficient and not res.drifted
        return
    weights = list(w) if weighted else [1.0] * len(current)
    seen = {v for v in reference if v is not None}
    new_mass = {}
    for v, wt in zip(current, weights, strict=True):
        if v is not None and v not in seen:
            new_mass[v] = new_mass.get(v, 0.0) + wt
    total = sum(weights)
    assert res.statistic == pytest.approx(sum(new_mass.values()) / total)
    assert {d["value"]: d["share"] for d in res.detail["new"]} == pytest.approx(
        {v: m / total for v, m in new_mass.items()}
    )
    big = {v for v, m in new_mass.items() if m / total >= 0.2 and current.count(v) >= 2}
    assert res.drifted == bool(big)
