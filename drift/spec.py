"""What a drift test is (TestSpec) and the store its module registers it in.

Every test is `func(reference, current, *, threshold, rng, min_samples, **frozen) -> TestResult`.
The spec says everything the battery and calibration need to run it without naming it:

- `kind`: which features it applies to (numeric, categorical, embedding, word_set: one set of
  strings per row, `FeatureSet.word_sets`);
- `direction`: how `threshold` is read — "statistic": drift when statistic > threshold;
  "p_value": drift when p ≤ threshold and the statistic is above the calibrated effect floor
  (p-value tests take `effect_floor`); `verdict` is that one rule, applied once, by `run`
  (`own_rule`: the detector combines several limits and decides itself);
- `args`: the frozen arguments for one feature (PSI edges, category levels, MMD reference);
- `per_feature`: run on each feature of its kind by the battery;
- `adjusted_across_features`: its p-values are Benjamini–Hochberg adjusted across the features
  of one segment (KS); `costly`: calibration runs it on a few chunks only (MMD);
  `calibrated`: calibration runs it though it is not per feature (instruction n-grams);
- `display_name`, `unit`: how pages and reasons speak of it and of its statistic; `reason`:
  its own sentence for a drifted result, when the generic one does not fit;
- `validation_threshold`, `validation_floor`: its level when a baseline's halves are compared;
- `collect`: runs it over a pair of feature sets itself (tests that are not one function of
  one feature's two arrays: clusters, eval trend, the prompt-conditioned tests);
- `scope`: "pair" (the battery: whole window, segments, validation, calibration), "window"
  (the whole window only, run by run_drift), "eval" (on the eval frame when one is given),
  "emitted" (its results are written by another test or stream: described, never run).

This module imports no test: drift.registry finds them (drift.stattests) and looks them up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from drift.result import TestResult

if TYPE_CHECKING:
    from drift.battery_inputs import TestInputs
    from drift.features.feature_set import FeatureSet

Kind = Literal["numeric", "categorical", "embedding", "word_set"]
Direction = Literal["statistic", "p_value"]
Scope = Literal["pair", "window", "eval", "emitted"]
TestFunc = Callable[..., TestResult]
ArgsFunc = Callable[["TestInputs", str], dict[str, Any]]
Collector = Callable[["TestSpec", "FeatureSet", "FeatureSet", "TestInputs"], list[TestResult]]


def decide(
    direction: Direction,
    statistic: float | None,
    p_value: float | None,
    threshold: float,
    effect_floor: float | None = None,
) -> bool:
    """The one drift verdict: statistic above threshold, or p at most alpha with a big effect."""
    if direction == "statistic":
        return statistic is not None and bool(statistic > threshold)
    big_enough = effect_floor is None or (statistic is not None and statistic > effect_floor)
    return p_value is not None and bool(p_value <= threshold and big_enough)


def not_run(*args: Any, **kwargs: Any) -> TestResult:
    """The function of a test that runs through its collector or is written elsewhere."""
    raise TypeError("this test runs through its collector (or is written by another)")


def no_args(inputs: TestInputs, feature: str) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class TestSpec:
    """What a test is: its input kind, how to read its threshold, and its defaults.

    `default_threshold` is also the floor calibration never goes below (for "statistic" tests)
    or the ceiling it never goes above (for "p_value" tests): the canonical value.
    """

    __test__ = False  # not a pytest class

    name: str
    kind: Kind
    direction: Direction
    default_threshold: float
    min_samples: int
    func: TestFunc
    description: str = ""
    args: ArgsFunc = no_args
    per_feature: bool = True
    adjusted_across_features: bool = False
    costly: bool = False
    calibrated: bool = False  # run by calibration even when not per feature
    own_rule: bool = False  # its detector decides (several limits at once): no verdict here
    display_name: str = ""
    unit: str = ""  # what its statistic (its effect) is spoken in
    validation_threshold: float | None = None  # None: the default threshold
    validation_floor: float | None = None
    collect: Collector | None = None
    scope: Scope = "pair"
    reason: Callable[[TestResult], str] | None = None  # its own words for a drifted result
    # a test not run per feature that needs nothing but this one feature's rows:
    # drift.baseline.power simulates its detectable effect there
    power_feature: str | None = None
    # its phrase in an alert summary (result, feature words, "; x % of traffic" or ""); None:
    # "<feature> moved k× the alert threshold"
    phrase: Callable[[TestResult, str, str], str] | None = None

    @property
    def title(self) -> str:
        return self.display_name or self.name

    @property
    def takes_effect_floor(self) -> bool:
        return self.direction == "p_value"

    def verdict(
        self,
        statistic: float | None,
        p_value: float | None,
        threshold: float,
        effect_floor: float | None = None,
    ) -> bool:
        return decide(self.direction, statistic, p_value, threshold, effect_floor)

    def run(
        self,
        reference: np.ndarray,
        current: np.ndarray,
        *,
        threshold: float | None = None,
        rng: np.random.Generator | int | None = None,
        **frozen: Any,
    ) -> TestResult:
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        thr = self.default_threshold if threshold is None else float(threshold)
        res = self.func(reference, current, threshold=thr, rng=rng, **frozen)
        return self.decided(res, frozen.get("effect_floor"))

    def decided(self, res: TestResult, effect_floor: float | None = None) -> TestResult:
        """The result with the spec's verdict applied: the one place a threshold is read."""
        if self.own_rule or res.insufficient or res.threshold is None:
            return res
        drifted = self.verdict(res.statistic, res.p_value, float(res.threshold), effect_floor)
        return res if drifted == res.drifted else replace(res, drifted=drifted)


_REGISTRY: dict[str, TestSpec] = {}


def register(spec: TestSpec) -> TestSpec:
    """Add (or replace, by name) a test; returns the spec so modules can keep a handle."""
    _REGISTRY[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def run_test(
    spec: TestSpec,
    feature: str,
    reference: np.ndarray,
    current: np.ndarray,
    inputs: TestInputs,
    **extra: Any,
) -> TestResult:
    """Run `spec` on one feature with its calibrated threshold, floor and frozen arguments."""
    levels = inputs.levels
    args: dict[str, Any] = {
        "min_samples": levels.need(spec.name, spec.min_samples),
        **spec.args(inputs, feature),
        **extra,
    }
    if spec.takes_effect_floor:
        args["effect_floor"] = levels.floor(spec.name, feature)
    res = spec.run(
        reference,
        current,
        threshold=levels.threshold(spec.name, feature, spec.default_threshold),
        rng=inputs.rng,
        **args,
    )
    return res.with_context(feature=feature)
