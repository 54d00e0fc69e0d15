"""The scale each evaluator scores on: an ingested score outside its evaluator's scale is
refused, so no sender can swing the eval trend (mean, Welch test) with one huge value.

The built-in evaluators declare theirs here; `VIGIL_EVAL_SCALES` adds or overrides others
(`{"toxicity": [0, 1]}`); any other evaluator, the bare `eval_score` ("default") included, is
bounded by +-`VIGIL_EVAL_DEFAULT_BOUND`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from vigil.config import Settings

# judge: G-Eval 1-5 (sidecar.evals.judge); relevancy: a cosine; refusal: 1 refused, 0 not
BUILTIN_SCALES: dict[str, tuple[float, float]] = {
    "judge": (1.0, 5.0),
    "relevancy": (-1.0, 1.0),
    "refusal": (0.0, 1.0),
}


@dataclass(frozen=True)
class EvalScales:
    default_bound: float
    declared: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Settings) -> EvalScales:
        return cls(settings.eval_default_bound, {**BUILTIN_SCALES, **settings.eval_scales})

    def scale(self, name: str) -> tuple[float, float]:
        return self.declared.get(name, (-self.default_bound, self.default_bound))

    def problem(self, name: str, score: float) -> str | None:
        """Why `score` is refused for evaluator `name`, or None when it is on the scale."""
        low, high = self.scale(name)
        if low <= score <= high:
            return None
        source = (
            "declared scale"
            if name in self.declared
            else "default bound (VIGIL_EVAL_DEFAULT_BOUND)"
        )
        return f"{score:g} is outside the {source} [{low:g}, {high:g}] of evaluator {name!r}"
