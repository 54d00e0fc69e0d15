"""The drift job's core: a window against a baseline, whole and per segment, into an outcome.

`run_drift` runs every test on the whole window ("*") and on each segment (tenant, segment,
prompt version, ...: one label "key=value" per value seen in the window) against the same
segment of the baseline. Segments smaller than `min_segment_size` on either side get one
insufficient result instead of tests. The whole-window tests see both sides thinned to the
population mix by `sample_weight` (drift.features.weights). Drifted results become proposed alerts
through the rules table (drift.alerting.proposals). Pure: frames and arrays in, a DriftOutcome out.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from drift.alerting.attribution import attribute_alerts
from drift.alerting.custom_rules import DEFAULT_RULES, Rule
from drift.alerting.proposals import propose_alerts
from drift.baseline.build import Baseline
from drift.battery import BatteryOptions
from drift.features.feature_set import EmbeddingBlock, FeatureSet
from drift.features.segments import (
    DEFAULT_SEGMENT_BY,
    MAX_SEGMENTS_PER_KEY,
    MIN_SEGMENT_SIZE,
    segment_values,
)
from drift.outcome import DriftOutcome
from drift.result import TestResult
from drift.streams.window_evidence import WindowEvidence, accumulate
from drift.window_run import WindowRun, check_dimensions

__all__ = ["check_dimensions", "run_drift"]


def run_drift(
    baseline: Baseline,
    current: pd.DataFrame | FeatureSet,
    *,
    segment_by: Sequence[str] = DEFAULT_SEGMENT_BY,
    rng_seed: int = 0,
    rules: Sequence[Rule] | None = None,
    embeddings: dict[str, EmbeddingBlock] | None = None,
    eval_frame: pd.DataFrame | FeatureSet | None = None,
    options: BatteryOptions | None = None,
    min_segment_size: int = MIN_SEGMENT_SIZE,
    max_segments_per_key: int = MAX_SEGMENTS_PER_KEY,
    weighted: bool = True,
    evidence: WindowEvidence | None = None,
) -> DriftOutcome:
    """Every registered test on the whole window and per segment; proposed alerts from `rules`.

    `weighted` (default): the whole-window ("*") tests run on both sides thinned to the
    population mix by `sample_weight` (drift.features.weights; a no-op when weights are absent or
    all equal); per-segment tests use the rows as they are (weights within a segment are ~equal).

    `eval_frame`, when given, is the trailing 7 days of eval-scored samples: the tests of scope
    "eval" (the eval trend) run on it instead of the window (an hourly window holds too few).

    `evidence` (drift.streams.window_evidence), when given, takes the whole window's response-test
    p-value (updated in place) and adds its stream's result: drifted when the responses'
    evidence summed over recent windows passes its calibrated level.
    """
    started = time.perf_counter()
    run = WindowRun(baseline, current, embeddings, eval_frame, options, rng_seed, weighted)
    results = run.whole_window()
    timings = {"whole_s": time.perf_counter() - started}
    for key in segment_by:
        for value in segment_values(run.cur, key, max_segments_per_key):
            results += run.segment(key, value, min_segment_size)
    timings["total_s"] = time.perf_counter() - started
    results = [_finite_or_not_drifted(r) for r in results]
    if evidence is not None:
        results += accumulate(evidence, results)
    alerts = attribute_alerts(
        propose_alerts(results, DEFAULT_RULES if rules is None else rules, run.sizes), results
    )
    reasons = list((baseline.validation or {}).get("reasons", []))
    if baseline.status == "candidate":
        reasons.append("baseline has not been validated")
    return DriftOutcome(
        results=results,
        alerts=alerts,
        segments=run.sizes,
        baseline_valid=baseline.valid,
        baseline_reasons=reasons,
        n_current=run.cur.n,
        seed=rng_seed,
        timings=timings,
    )


def _finite_or_not_drifted(r: TestResult) -> TestResult:
    """A drifted result needs a number to stand on: one whose statistic came out NaN/inf
    (overflowing input) is kept, marked, and never raises an alert."""
    if not r.drifted or (r.statistic is not None and np.isfinite(r.statistic)):
        return r
    return replace(r, drifted=False, detail={**r.detail, "not_drifted": "statistic is not finite"})
