"""Fixing a canary baseline: the expected output of each probe and a tolerance measured from the
engine's own noise, never guessed.

Each probe runs `repeats` times alone, then `repeats` times inside a busy batch (every probe at
once plus sampled filler chats, so it shares steps with other sequences at other positions). The
first alone run is the expectation; the worst deviation of all the other runs, times a safety
factor and above stated floors, is the tolerance (`drift.detectors.canary.calibrate_tolerance`).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from drift.detectors.canary import Observation, Tolerance, calibrate_tolerance, compare
from sidecar.canary.probes import Probe, ProbeSet


@dataclass(frozen=True)
class CalibrationResult:
    expected: dict[str, Observation]
    tolerances: dict[str, Tolerance]
    noise: dict[str, dict[str, Any]]  # per probe: what the repeated runs showed


def run_alone(run: Callable[[Probe], Observation], probes: list[Probe]) -> dict[str, Observation]:
    return {p.name: run(p) for p in probes}


def run_in_batch(
    run: Callable[[Probe], Observation],
    filler: Callable[[str, int], None],
    probe_set: ProbeSet,
    round_index: int,
) -> dict[str, Observation]:
    """Every probe at once, with the filler chats sent `filler_copies` times each around them."""
    cal = probe_set.calibration
    fillers = [
        (text, probe_set.seed + 1000 * round_index + i)
        for i, text in enumerate(cal.fillers * cal.filler_copies)
    ]
    workers = len(probe_set.probes) + len(fillers)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        filler_futures = [pool.submit(filler, text, seed) for text, seed in fillers]
        probe_futures = {p.name: pool.submit(run, p) for p in probe_set.probes}
        observed = {name: f.result() for name, f in probe_futures.items()}
        for f in filler_futures:
            f.result()
    return observed


def calibrate(
    run: Callable[[Probe], Observation], filler: Callable[[str, int], None], probe_set: ProbeSet
) -> CalibrationResult:
    repeats = probe_set.calibration.repeats
    alone = [run_alone(run, probe_set.probes) for _ in range(repeats)]
    batched = [run_in_batch(run, filler, probe_set, r) for r in range(repeats)]
    expected = alone[0]
    tolerances: dict[str, Tolerance] = {}
    noise: dict[str, dict[str, Any]] = {}
    for probe in probe_set.probes:
        name = probe.name
        others = [a[name] for a in alone[1:]] + [b[name] for b in batched]
        tolerances[name] = calibrate_tolerance(expected[name], others)
        alone_cmp = [compare(expected[name], a[name]) for a in alone[1:]]
        batch_cmp = [compare(expected[name], b[name]) for b in batched]
        noise[name] = {
            "alone_runs": len(alone),
            "batch_runs": len(batched),
            "alone_identical_tokens": all(c.first_divergence is None for c in alone_cmp),
            "batch_identical_tokens": all(c.first_divergence is None for c in batch_cmp),
            "alone_logprob_delta_max": max((c.logprob_delta_max for c in alone_cmp), default=0.0),
            "batch_logprob_delta_max": max((c.logprob_delta_max for c in batch_cmp), default=0.0),
            "min_token_match_rate": min(
                (c.token_match_rate for c in alone_cmp + batch_cmp), default=1.0
            ),
        }
    return CalibrationResult(expected, tolerances, noise)
