"""Validate a candidate baseline: its first half (in time) against its second half.

A baseline is the yardstick for every later window, so a baseline that already contains a
drift would hide that drift forever. The halves are compared with every test (clusters fitted on
the first half only, so a persona that appears mid-baseline shows as new); any drift rejects the
baseline, with one reason per drifted test. Criteria are stricter on effect size than alerting
(PSI 0.1, the canonical "minor shift") but stricter on significance too (α = 0.001, KS also
needs D > 0.05), because with tens of thousands of samples per half a p-value alone flags
differences too small to matter. With unequal sample weights the halves are those of the
weight-thinned rows (drift.features.weights), so a quiet hour's over-sampled segments are no
"drift".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from drift.baseline.build import MIN_CLUSTER_POINTS, Baseline, freeze
from drift.battery import BatteryOptions, Levels, run_battery
from drift.formatting import fmt_num
from drift.registry import all_tests, find_test
from drift.result import TestResult

MIN_HALF = 50


def validation_levels() -> Levels:
    """Each registered test's validation threshold and effect floor (drift.registry)."""
    specs = all_tests()
    return Levels(
        thresholds={
            s.name: {"*": s.validation_threshold}
            for s in specs
            if s.validation_threshold is not None
        },
        effect_floors={
            s.name: {"*": s.validation_floor} for s in specs if s.validation_floor is not None
        },
    )


@dataclass
class ValidationResult:
    valid: bool
    reasons: list[str]
    results: list[TestResult] = field(default_factory=list)
    n_first: int = 0
    n_second: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "reasons": self.reasons,
            "n_first": self.n_first,
            "n_second": self.n_second,
            "notes": self.notes,
            "results": [r.to_dict() for r in self.results],
        }


def describe(r: TestResult) -> str:
    """One human line for a drifted result: the test's own words when it has them (`reason`),
    else its statistic against the threshold, or its p-value for tests read by p."""
    spec = find_test(r.test)
    if spec is not None and spec.reason is not None:
        return spec.reason(r)
    stat, thr, p = fmt_num(r.statistic), fmt_num(r.threshold), fmt_num(r.p_value)
    read_by_p = spec is None or spec.direction == "p_value" or spec.own_rule
    if r.p_value is not None and read_by_p:
        return f"{r.test} on {r.feature}: p = {p} ≤ {thr} (statistic {stat})"
    return f"{r.test} on {r.feature}: {stat} > {thr}"


def validate_baseline(
    baseline: Baseline, *, options: BatteryOptions | None = None, levels: Levels | None = None
) -> ValidationResult:
    """Compare the halves; set baseline.status to validated or rejected and keep the result."""
    pop = baseline.population()  # halves of the population, not of the stratified sample
    fs = pop.features
    half = fs.n // 2
    notes = []
    if pop.weighting is not None:
        notes.append(
            f"weighted: {pop.weighting.n_kept} of {pop.weighting.n_rows} rows kept by "
            f"sample_weight (effective sample size {pop.weighting.ess:.0f})"
        )
    if fs.timestamps is None or not np.isfinite(fs.timestamps).any():
        notes.append("no timestamps: halves split in record order")
    if half < MIN_HALF:
        result = ValidationResult(
            False,
            [f"too few samples to validate: {fs.n} < {2 * MIN_HALF}"],
            n_first=half,
            n_second=fs.n - half,
            notes=notes,
        )
    else:
        first, second = fs.take(np.arange(half)), fs.take(np.arange(half, fs.n))
        rng = np.random.default_rng([baseline.seed, 2])
        frozen = freeze(
            first,
            rng,
            cluster=any(len(b.vectors) >= MIN_CLUSTER_POINTS for b in first.embeddings.values()),
        )
        opt = options or BatteryOptions(eval_window_days=float("inf"))
        results = run_battery(
            first, second, frozen=frozen, levels=levels or validation_levels(), rng=rng, options=opt
        )
        results = [r.with_context(segment="*") for r in results]
        reasons = [describe(r) for r in results if r.drifted]
        result = ValidationResult(not reasons, reasons, results, half, fs.n - half, notes)
    baseline.status = "validated" if result.valid else "rejected"
    baseline.validation = result.to_dict()
    return result
