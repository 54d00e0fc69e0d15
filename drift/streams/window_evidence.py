"""Response evidence accumulated across windows: a quiet swap that no single window proves.

Each window's whole-window `response_agg` p-value (drift.stattests.response_agg) becomes one
evidence score z = Φ⁻¹(1 - p + 1 / (2(1 + B))) (B the permutations; the half step centres the
permutation grid, so a p-value of an unchanged window gives z ≈ N(0, 1)). A CUSUM of the
existing machinery (drift.streams.sequential.CusumDetector, one stream) adds them up:
S <- max(0, S + z - k), k = 0.5 (tuned for windows whose evidence sits one sd above the null:
a median window p near 0.16), and raises an alarm when S passes h.

Calibration is the existing one (drift.streams.sequential.calibrate): h is set for `arl0` windows
between false alarms by bootstrap streams from the exact null of z (the B + 1 grid points, each
equally likely under no change). Only the "up" side is evidence; a "down" alarm (windows more
alike than chance) restarts the sums and is not reported.

`first_seen` is the change-point estimate CUSUM gives for free: the windows since S last sat at
0, counting the current one, so an alarm reads "first seen k windows ago" with k = first_seen
- 1. `to_dict` / `from_dict` carry the state between drift runs; a new baseline starts afresh.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import norm

from drift.result import ALL, TestResult
from drift.stattests.response_agg import NAME as AGG
from drift.streams.sequential import CusumDetector, calibrate

NAME = "response_evidence"
STREAM = "response_evidence"
SHIFT = 1.0  # k = SHIFT / 2


def evidence_z(p_value: float, permutations: int) -> float:
    """The evidence score of one window's p-value (higher: more evidence of a change)."""
    step = 0.5 / (1 + permutations)
    return float(norm.isf(min(max(p_value - step, step), 1.0 - step)))


def null_scores(permutations: int) -> np.ndarray:
    """Every value z takes under no change, each equally likely (the permutation p grid)."""
    grid = np.arange(1, permutations + 2) / (1 + permutations)
    return np.asarray([evidence_z(p, permutations) for p in grid])


@dataclass
class WindowEvidence:
    detector: CusumDetector
    permutations: int
    first_seen: int = 0  # windows since the up-sum last sat at 0, the current one counted
    baseline_id: int | None = None

    @property
    def level(self) -> float:
        return float(self.detector.state[0])

    def update(self, p_value: float) -> TestResult:
        """Feed one window's p-value; the result says whether the sum passed h, and since when."""
        z = evidence_z(p_value, self.permutations)
        rising = self.level + z - self.detector.k > 0
        self.first_seen = self.first_seen + 1 if rising else 0
        alarms = self.detector.update_many(np.asarray([[z]]))
        alarm = next((a for a in alarms if a.direction == "up"), None)
        level = alarm.statistic if alarm else self.level
        first_seen = self.first_seen
        if alarms:
            self.first_seen = 0
        return TestResult(
            test=NAME,
            statistic=float(level),
            p_value=None,
            threshold=float(self.detector.h),
            drifted=alarm is not None,
            feature="responses",
            detail={
                "window_p": float(p_value),
                "window_z": z,
                "first_seen_windows_ago": first_seen - 1 if first_seen else None,
                "windows": first_seen,
                "arl0_windows": self.detector.arl0,
            },
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "detector": self.detector.to_dict(),
            "permutations": self.permutations,
            "first_seen": self.first_seen,
            "baseline_id": self.baseline_id,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WindowEvidence:
        return cls(
            CusumDetector.from_dict(data["detector"]),
            int(data["permutations"]),
            int(data["first_seen"]),
            data.get("baseline_id"),
        )


def accumulate(evidence: WindowEvidence, results: list[TestResult]) -> list[TestResult]:
    """The whole window's response_agg p-value fed to `evidence`: its result, or none when the
    window had no such p-value (too few rows: no evidence either way, the sum stays)."""
    whole = [
        r.p_value
        for r in results
        if r.test == AGG and r.segment == ALL and not r.insufficient and r.p_value is not None
    ]
    return [evidence.update(float(whole[0]))] if whole else []


def calibrate_evidence(
    *, arl0_windows: float, permutations: int, seed: int = 0, baseline_id: int | None = None
) -> WindowEvidence:
    """A fresh accumulator whose h gives `arl0_windows` windows between false alarms."""
    detector = calibrate(
        null_scores(permutations)[:, None],
        arl0=arl0_windows,
        rng=np.random.default_rng([seed, 17]),
        shift=SHIFT,
        streams=(STREAM,),
    )
    return WindowEvidence(detector, int(permutations), baseline_id=baseline_id)


def since_words(detail: dict) -> str:
    """When accumulated evidence began: "first seen 3 windows ago" ("in this window" at 0)."""
    k = detail.get("first_seen_windows_ago")
    if not isinstance(k, int) or k <= 0:
        return "first seen in this window"
    return f"first seen {k} window{'s' if k != 1 else ''} ago"
