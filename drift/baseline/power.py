"""The smallest effect each drift test detects at the window size, measured on the baseline.

For every registered test run per feature (drift.registry) and every baseline feature of its
kind: for each of `repeats` windows the baseline's rows are split in two seeded random halves,
the first is the reference and `window_size` rows of the second are the window (a fresh split
each time, so the power averages over references as well as windows, as the textbook formulas
do); an effect of size e is put into each window, and the test runs with the baseline's
calibrated threshold and effect floor. The share of windows it
flags is the power at e; bisection on e finds the smallest effect detected with `power` (80 %).
The same windows, effect draws and test seeds are used at every e (common random numbers), so
the power curve is smooth in e and the bisection stable.

Effects, each in the feature's own terms:

- numeric: every window value shifted by e reference standard deviations (`shift`, unit sd);
  features on a lattice (counts, lengths) are shifted by whole lattice steps, each value rounded
  up or down at random so that the mean shift is e sd (a fractional shift would move every
  value off the lattice, which the tests would see at once);
- categorical: a share e of the window's rows moved from the most common value to the second
  (or to a new value when there is only one): `share`, in absolute share points;
- embedding: a share e of the window's rows moved by one typical distance between two rows (the
  median pairwise distance) along one seeded direction: `mix`, a share of the rows.

Tests adjusted across features (KS, Benjamini–Hochberg) run at α / m, the level BH gives one
moved feature among m. The reference is half the baseline, so the power is a little below that
of the whole baseline (conservative). The prompt-mix test (`cluster_mix`) is simulated on the
prompt embeddings, where the job runs it; the prompt-conditioned tests need prompt strata and
the instruction n-gram test word sets, so they are listed as not simulated. Costly tests
(MMD) run against a reference of at most COSTLY_REFERENCE rows (the window's drift job uses up
to `mmd_max_samples`), so their figure is an upper bound on the smallest effect they detect.

Cost: (1 + steps) x repeats test runs per test and feature; with the defaults about one
calibration's worth on a 3,000-row baseline.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from drift.baseline.build import Baseline
from drift.baseline.power_report import REPEATS, TARGET_POWER, DetectableEffect, PowerReport
from drift.battery_inputs import BatteryOptions, Levels, TestInputs
from drift.registry import TestSpec, all_tests, run_test
from drift.stattests.mmd import median_bandwidth, prepare_reference

STEPS = 5  # bisection halvings of the log effect range
SPAN = 64.0  # the range searched: [largest / SPAN, largest]
COSTLY_REPEATS = 8  # costly tests (MMD): fewer windows and steps,
COSTLY_STEPS = 4
COSTLY_REFERENCE = 600  # and a reference capped at this many rows
MAX_SHIFT_SD = 3.0
NEW_VALUE = "(a new value)"


def smallest_effect(
    detects: Any, largest: float, power: float, repeats: int, steps: int = STEPS
) -> tuple[float | None, float]:
    """The smallest e in [largest / SPAN, largest] with detection rate >= power, by bisection on
    log e (`steps` halvings of the log range: SPAN = 64 and 5 steps give e within 14 %);
    `detects(e, r)` says whether window r flags effect e. Returns (e or None, rate at largest).
    """

    def rate(e: float) -> float:
        return float(np.mean([detects(e, r) for r in range(repeats)]))

    at_largest = rate(largest) if largest > 0 else 0.0
    if at_largest < power:
        return None, at_largest
    low, high = np.log(largest / SPAN), np.log(largest)
    for _ in range(steps):
        mid = 0.5 * (low + high)
        if rate(float(np.exp(mid))) >= power:
            high = mid
        else:
            low = mid
    return float(np.exp(high)), at_largest


def lattice_step(values: np.ndarray) -> float | None:
    """The step of the lattice the values lie on (1 for counts), or None when they do not."""
    distinct = np.unique(values)
    if distinct.size < 2:
        return None
    step = float(np.min(np.diff(distinct)))
    ratio = (distinct - distinct[0]) / step
    return step if np.allclose(ratio, np.round(ratio), atol=1e-6) else None


def _effects_for(
    spec: TestSpec, ref: np.ndarray, windows: list[np.ndarray], rng_seed: list[int]
) -> tuple[Any, float, dict[str, Any]]:
    """(apply(window r, e) -> window values, the largest effect, the fields describing it);
    `ref`: the baseline's values, which set the effect's scale."""
    seed = np.random.default_rng(rng_seed)
    if spec.kind == "numeric":
        finite = ref[np.isfinite(ref)]
        sd = float(np.std(finite)) if finite.size else 0.0
        sd = sd if sd > 0 else 1.0
        unit = lattice_step(finite)
        if unit is not None:
            ups = [seed.random(len(w)) for w in windows]

            def shift(r: int, e: float) -> np.ndarray:
                whole, frac = divmod(e * sd / unit, 1.0)
                return windows[r] + unit * (whole + (ups[r] < frac))

        else:

            def shift(r: int, e: float) -> np.ndarray:
                return windows[r] + e * sd

        return (
            shift,
            MAX_SHIFT_SD,
            {"kind": "shift", "scale": sd, "mean": float(np.mean(finite)) if finite.size else None},
        )
    if spec.kind == "categorical":
        values, counts = np.unique(ref.astype(str), return_counts=True)
        order = np.argsort(-counts, kind="stable")
        source = str(values[order[0]])
        target = str(values[order[1]]) if len(order) > 1 else NEW_VALUE
        orders = [seed.permutation(np.flatnonzero(w.astype(str) == source)) for w in windows]

        def move(r: int, e: float) -> np.ndarray:
            w = windows[r].copy()
            w[orders[r][: int(round(e * len(w)))]] = target
            return w

        shares = {str(v): c / counts.sum() for v, c in zip(values, counts, strict=True)}
        largest = float(
            np.mean([len(o) / max(len(w), 1) for o, w in zip(orders, windows, strict=True)])
        )
        largest = min(largest, 1.0)
        return (
            move,
            largest,
            {
                "kind": "share",
                "source": source,
                "target": target,
                "source_share": float(shares[source]),
                "target_share": float(shares.get(target, 0.0)),
            },
        )
    distance = median_bandwidth(ref, seed)
    direction = seed.normal(size=ref.shape[1])
    norm = float(np.linalg.norm(direction)) or 1.0
    step = np.asarray(distance / norm * direction, dtype=np.float32)
    orders = [seed.permutation(len(w)) for w in windows]

    def mix(r: int, e: float) -> np.ndarray:
        w = windows[r].copy()
        w[orders[r][: int(round(e * len(w)))]] += step
        return w

    return mix, 1.0, {"kind": "mix", "scale": float(distance)}


def _feature_values(baseline: Baseline, spec: TestSpec, name: str) -> np.ndarray | None:
    fs = baseline.features
    if spec.kind == "numeric":
        return fs.numeric.get(name)
    if spec.kind == "categorical":
        return np.asarray(fs.categorical_values(name), dtype=object)
    block = fs.embeddings.get(name)
    return None if block is None else np.asarray(block.vectors, dtype=np.float32)


def _features_of(baseline: Baseline, spec: TestSpec) -> list[str]:
    fs = baseline.features
    if not spec.per_feature:
        name = spec.power_feature
        return [name] if name is not None and name in fs.embeddings else []
    kinds: dict[str, list[str]] = {
        "numeric": list(fs.numeric),
        "categorical": list(fs.categorical),
        "embedding": list(fs.embeddings),
    }
    return sorted(kinds[spec.kind])


def detectable_effects(
    baseline: Baseline,
    *,
    window_size: int,
    power: float = TARGET_POWER,
    repeats: int = REPEATS,
    costly_repeats: int = COSTLY_REPEATS,
    steps: int = STEPS,
    options: BatteryOptions | None = None,
    tests: tuple[str, ...] | None = None,
) -> PowerReport:
    """The smallest effect each per-feature test detects on each feature (module docstring)."""
    if window_size < 1:
        raise ValueError(f"window_size must be positive, got {window_size}")
    opt = options or BatteryOptions()
    # tests read by a threshold; a detector's own rule has no effect size to simulate
    specs = [s for s in all_tests() if not s.own_rule and (tests is None or s.name in tests)]
    report = PowerReport(
        window_size=int(window_size),
        reference_size=0,
        power=power,
        repeats=repeats,
        seed=baseline.seed,
        not_simulated=[s.name for s in specs if not s.per_feature and s.power_feature is None],
    )
    for spec in (s for s in specs if s.per_feature or s.power_feature is not None):
        for name in _features_of(baseline, spec):
            values = _feature_values(baseline, spec, name)
            if values is None or len(values) < 2:
                continue
            report.reference_size = max(report.reference_size, len(values) // 2)
            reps, n_steps = (costly_repeats, COSTLY_STEPS) if spec.costly else (repeats, steps)
            effect = _one(baseline, spec, name, values, window_size, power, reps, n_steps, opt)
            report.effects.append(effect)
    return report


def _one(
    baseline: Baseline,
    spec: TestSpec,
    name: str,
    values: np.ndarray,
    window_size: int,
    power: float,
    reps: int,
    steps: int,
    opt: BatteryOptions,
) -> DetectableEffect:
    split = np.random.default_rng([baseline.seed, 6])
    half = len(values) // 2
    size = min(window_size, len(values) - half)
    orders = [split.permutation(len(values)) for _ in range(reps)]
    refs = [values[o[:half]] for o in orders]
    windows = [values[o[half : half + size]] for o in orders]
    apply, largest, fields = _effects_for(spec, values, windows, [baseline.seed, 7])
    levels = _levels_for(baseline.levels, spec, name, len(baseline.features.numeric))
    mmd_refs: list[dict[str, Any]] = [{} for _ in range(reps)]
    if spec.kind == "embedding":
        cap = min(opt.mmd_max_samples, COSTLY_REFERENCE) if spec.costly else opt.mmd_max_samples
        for r, ref in enumerate(refs):
            rng = np.random.default_rng([baseline.seed, 8, r])
            mmd_refs[r] = {name: prepare_reference(ref, rng=rng, max_samples=cap)}
    note = None if size == window_size else f"only {size} rows to draw windows from"
    insufficient = False

    def detects(e: float, r: int) -> bool:
        nonlocal insufficient
        rng = np.random.default_rng([baseline.seed, 9, r])
        inputs = TestInputs(baseline.frozen, levels, opt, rng, mmd_refs[r])
        result = run_test(spec, name, refs[r], apply(r, e), inputs)
        insufficient = insufficient or result.insufficient
        return bool(result.drifted)

    effect, at_largest = smallest_effect(detects, largest, power, reps, steps)
    if insufficient:
        effect, note = None, f"a window of {size} rows is below the test's minimum"
    return DetectableEffect(
        test=spec.name,
        feature=name,
        effect=None if effect is None else float(effect),
        largest=float(largest),
        power_at_largest=at_largest,
        note=note,
        **fields,
    )


def _levels_for(levels: Levels, spec: TestSpec, feature: str, numeric_count: int) -> Levels:
    """The calibrated levels, with α / m for a test adjusted across m numeric features."""
    if not spec.adjusted_across_features or numeric_count <= 1:
        return levels
    thresholds = {k: dict(v) for k, v in levels.thresholds.items()}
    alpha = levels.threshold(spec.name, feature, spec.default_threshold) / numeric_count
    thresholds.setdefault(spec.name, {})[feature] = alpha
    return replace(levels, thresholds=thresholds)
