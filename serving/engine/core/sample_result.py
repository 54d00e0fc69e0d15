"""`SampleResult`: one token the runner sampled for one sequence, as the output sinks record it."""

from __future__ import annotations

from dataclasses import dataclass

from serving.engine.core.request import Sequence


@dataclass(slots=True)
class SampleResult:
    seq: Sequence
    token_id: int
    logprob: float
    entropy: float
    top_logprobs: list[tuple[int, float]] | None
