"""The registry of drift tests: each test is one module in drift.stattests with one TestSpec.

Every test is `func(reference, current, *, threshold, rng, min_samples, **frozen) -> TestResult`.
The spec says everything the battery and calibration need to run it without naming it:

- `kind`: which features it applies to (numeric, categorical, embedding, word_set: one set of
  strings per row, `FeatureSet.word_sets`);
- `direction`: how `threshold` is read — "statistic": drift when statistic > threshold;
  "p_value": drift when p ≤ threshold and the statistic is above the calibrated effect floor
  (p-value tests take `effect_floor`); `verdict` is that one rule, which every test applies;
- `args`: the frozen arguments for one feature (PSI edges, category levels, MMD reference);
- `per_feature`: run on each feature of its kind by the battery (the prompt-mix and
  prompt-conditioned tests are run by drift.detectors.prompt_response instead);
- `adjusted_across_features`: its p-values are Benjamini–Hochberg adjusted across the features
  of one segment (KS); `costly`: calibration runs it on a few chunks only (MMD);
  `calibrated`: calibration runs it though it is not per feature (instruction n-grams).

Adding a test is one module in drift/stattests that calls `register` (found by discovery).
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
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

BUILTIN_PACKAGE = "drift.stattests"


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
_loaded = False
_loading = threading.RLock()


def register(spec: TestSpec) -> TestSpec:
    """Add (or replace, by name) a test; returns the spec so modules can keep a handle."""
    _REGISTRY[spec.name] = spec
    return spec


def _ensure_builtins() -> None:
    # marked loaded only after every import: a second thread asking meanwhile waits for them
    # instead of reading a half-filled registry
    global _loaded
    if _loaded:
        return
    with _loading:
        if not _loaded:
            package = importlib.import_module(BUILTIN_PACKAGE)
            for info in pkgutil.iter_modules(package.__path__, BUILTIN_PACKAGE + "."):
                importlib.import_module(info.name)
            _loaded = True


def find_test(name: str) -> TestSpec | None:
    """The spec of a registered test; None for results of checks outside the registry."""
    _ensure_builtins()
    return _REGISTRY.get(name)


def get_test(name: str) -> TestSpec:
    spec = find_test(name)
    if spec is None:
        known = ", ".join(sorted(_REGISTRY))
        raise KeyError(f"unknown drift test {name!r}; registered: {known}")
    return spec


def tests_for(kind: Kind, *, per_feature: bool | None = None) -> list[TestSpec]:
    """The registered tests of `kind` (optionally only those run per feature), in a stable order."""
    _ensure_builtins()
    return [
        spec
        for spec in all_tests()
        if spec.kind == kind and (per_feature is None or spec.per_feature == per_feature)
    ]


def all_tests(scope: Scope | None = None) -> list[TestSpec]:
    """Every registered test (of one scope), in a stable order."""
    _ensure_builtins()
    return sorted(
        (s for s in _REGISTRY.values() if scope is None or s.scope == scope),
        key=lambda s: (s.kind, s.name),
    )


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)
