"""Canary comparison: one probe's run against its recorded expectation, as numbers and a verdict.

Pure: sequences of token ids and logprobs in, results out. A probe's observation is the token ids
it produced (or, for a perplexity probe, the reference text's token ids), the logprob of each of
those tokens, and for perplexity probes the perplexity of the reference text.

Logprob deltas are taken only over the positions before the first diverging token: from there on
the two runs condition on different contexts and their logprobs measure different things.
Tolerances come from `calibrate_tolerance`: the largest deviation seen across repeated runs
(alone and inside busy batches) times a safety factor, never below stated floors.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

# Floors: a deterministic CPU engine can repeat itself bit for bit, which would calibrate a zero
# tolerance that flags harmless reorderings of float sums (another thread count, another
# BLAS). These sit well above float32 reordering noise on a 100M+ model (~1e-5 nats) and well
# below what a real numerics change does (a 5 % attention-scale error moves logprobs ~1e-2).
FLOOR_LOGPROB_DELTA_MAX = 1e-3  # nats, any single token
FLOOR_LOGPROB_DELTA_MEAN = 2.5e-4  # nats, averaged over the comparable tokens
FLOOR_PERPLEXITY_RATIO = 1e-3  # |observed / expected - 1|
SAFETY_FACTOR = 4.0
# a perplexity this much worse than recorded is critical, not just a mismatch
CRITICAL_PERPLEXITY_RATIO = 1.05


@dataclass(frozen=True)
class Observation:
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]  # one per token id
    perplexity: float | None = None

    @classmethod
    def of(
        cls, token_ids: Sequence[int], logprobs: Sequence[float], perplexity: float | None = None
    ) -> Observation:
        if len(token_ids) != len(logprobs):
            raise ValueError(f"{len(token_ids)} token ids but {len(logprobs)} logprobs")
        return cls(tuple(int(t) for t in token_ids), tuple(float(x) for x in logprobs), perplexity)

    @property
    def token_hash(self) -> str:
        return token_hash(self.token_ids)


@dataclass(frozen=True)
class Comparison:
    token_match_rate: float  # equal tokens position by position / the longer length
    first_divergence: int | None  # first position whose token differs (or where one run ends)
    logprob_delta_max: float  # over the positions before the first divergence; 0 if none
    logprob_delta_mean: float
    perplexity_ratio: float | None  # observed / expected

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Tolerance:
    min_token_match_rate: float = 1.0
    logprob_delta_max: float = FLOOR_LOGPROB_DELTA_MAX
    logprob_delta_mean: float = FLOOR_LOGPROB_DELTA_MEAN
    perplexity_ratio: float = FLOOR_PERPLEXITY_RATIO  # allowed |ratio - 1|

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Tolerance:
        return cls(**{k: float(v) for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Verdict:
    ok: bool
    critical: bool  # perplexity degraded past CRITICAL_PERPLEXITY_RATIO
    reasons: tuple[str, ...]


def token_hash(token_ids: Sequence[int]) -> str:
    """SHA-256 over the ids as little-endian int64: equal hashes, equal sequences."""
    return hashlib.sha256(np.asarray(token_ids, dtype="<i8").tobytes()).hexdigest()


def perplexity(logprobs: Sequence[float]) -> float:
    """exp(-mean logprob) of the scored tokens."""
    if not logprobs:
        raise ValueError("perplexity of no tokens")
    return math.exp(-float(np.mean(np.asarray(logprobs, dtype=np.float64))))


def first_divergence(expected: Sequence[int], observed: Sequence[int]) -> int | None:
    for i, (a, b) in enumerate(zip(expected, observed, strict=False)):
        if a != b:
            return i
    return None if len(expected) == len(observed) else min(len(expected), len(observed))


def compare(expected: Observation, observed: Observation) -> Comparison:
    longest = max(len(expected.token_ids), len(observed.token_ids))
    matches = sum(a == b for a, b in zip(expected.token_ids, observed.token_ids, strict=False))
    diverge = first_divergence(expected.token_ids, observed.token_ids)
    comparable = diverge if diverge is not None else len(expected.token_ids)
    deltas = np.abs(
        np.asarray(expected.logprobs[:comparable], dtype=np.float64)
        - np.asarray(observed.logprobs[:comparable], dtype=np.float64)
    )
    ratio = None
    if expected.perplexity is not None and observed.perplexity is not None:
        ratio = observed.perplexity / expected.perplexity
    return Comparison(
        token_match_rate=matches / longest if longest else 1.0,
        first_divergence=diverge,
        logprob_delta_max=float(deltas.max()) if deltas.size else 0.0,
        logprob_delta_mean=float(deltas.mean()) if deltas.size else 0.0,
        perplexity_ratio=ratio,
    )


def judge(comparison: Comparison, tolerance: Tolerance) -> Verdict:
    reasons = []
    c, t = comparison, tolerance
    if c.token_match_rate < t.min_token_match_rate:
        reasons.append(
            f"token match {c.token_match_rate:.3f} < {t.min_token_match_rate:.3f} "
            f"(first divergence at token {c.first_divergence})"
        )
    if c.logprob_delta_max > t.logprob_delta_max:
        reasons.append(f"max logprob delta {c.logprob_delta_max:.2e} > {t.logprob_delta_max:.2e}")
    if c.logprob_delta_mean > t.logprob_delta_mean:
        reasons.append(
            f"mean logprob delta {c.logprob_delta_mean:.2e} > {t.logprob_delta_mean:.2e}"
        )
    if c.perplexity_ratio is not None and abs(c.perplexity_ratio - 1.0) > t.perplexity_ratio:
        reasons.append(
            f"perplexity ratio {c.perplexity_ratio:.4f} outside 1 ± {t.perplexity_ratio:.2e}"
        )
    critical = c.perplexity_ratio is not None and c.perplexity_ratio > CRITICAL_PERPLEXITY_RATIO
    return Verdict(ok=not reasons, critical=critical, reasons=tuple(reasons))


def calibrate_tolerance(
    expected: Observation, runs: Sequence[Observation], factor: float = SAFETY_FACTOR
) -> Tolerance:
    """The tolerance for one probe from repeated runs of the unchanged engine (alone and in
    batches): the worst deviation seen times `factor`, never tighter than the floors. A probe
    whose greedy tokens already flip between runs keeps the lowest match rate seen."""
    comparisons = [compare(expected, run) for run in runs]
    if not comparisons:
        return Tolerance()
    worst_max = max(c.logprob_delta_max for c in comparisons)
    worst_mean = max(c.logprob_delta_mean for c in comparisons)
    ratios = [abs(c.perplexity_ratio - 1.0) for c in comparisons if c.perplexity_ratio is not None]
    return Tolerance(
        min_token_match_rate=min(c.token_match_rate for c in comparisons),
        logprob_delta_max=max(FLOOR_LOGPROB_DELTA_MAX, factor * worst_max),
        logprob_delta_mean=max(FLOOR_LOGPROB_DELTA_MEAN, factor * worst_mean),
        perplexity_ratio=max(FLOOR_PERPLEXITY_RATIO, factor * max(ratios, default=0.0)),
    )
