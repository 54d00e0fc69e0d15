"""What the drift job hands on: all results, per-segment sizes and the proposed alerts."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from drift.result import ALL, TestResult, jsonable


@dataclass(frozen=True)
class ProposedAlert:
    severity: str  # review | moderate | high | critical
    rule: str
    kind: str  # prompt | model | eval | persona | operational
    segment: str
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return jsonable(asdict(self))


@dataclass
class DriftOutcome:
    results: list[TestResult]
    alerts: list[ProposedAlert]
    segments: dict[str, dict[str, int]]  # label -> {"n_current", "n_reference"}
    baseline_valid: bool
    baseline_reasons: list[str] = field(default_factory=list)
    n_current: int = 0
    seed: int = 0
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def drifted(self) -> bool:
        """Drift means an alert was proposed: results alone may be significant but below rules."""
        return bool(self.alerts)

    @property
    def insufficient_data(self) -> bool:
        """The whole window was too small for at least one test."""
        return any(r.insufficient for r in self.results if r.segment == ALL)

    def results_for(
        self, *, test: str | None = None, feature: str | None = None, segment: str | None = None
    ) -> list[TestResult]:
        return [
            r
            for r in self.results
            if (test is None or r.test == test)
            and (feature is None or r.feature == feature)
            and (segment is None or r.segment == segment)
        ]

    def to_dict(self, full: bool = False) -> dict[str, Any]:
        """The `vigil check --json` shape; full=True adds details, evidence, sizes, timings."""
        out: dict[str, Any] = {
            "drifted": self.drifted,
            "baseline_valid": self.baseline_valid,
            "insufficient_data": self.insufficient_data,
            "alerts": [
                {k: a.to_dict()[k] for k in ("severity", "rule", "kind", "segment", "summary")}
                | ({"evidence": a.to_dict()["evidence"]} if full else {})
                for a in self.alerts
            ],
            "results": [
                {
                    k: d[k]
                    for k in (
                        "test",
                        "feature",
                        "segment",
                        "statistic",
                        "p_value",
                        "threshold",
                        "drifted",
                    )
                }
                | ({"insufficient": d["insufficient"], "detail": d["detail"]} if full else {})
                for d in (r.to_dict() for r in self.results)
            ],
        }
        if full:
            out.update(
                baseline_reasons=self.baseline_reasons,
                segments=self.segments,
                n_current=self.n_current,
                seed=self.seed,
                timings=self.timings,
            )
        return out
