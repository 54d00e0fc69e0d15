"""The registry of drift tests: a spec per test and one pure function signature for all.

Every test is `func(reference, current, *, threshold, rng, **frozen) -> TestResult`, where
`frozen` carries what the baseline froze for it (PSI bin edges, category levels, the MMD
bandwidth and reference kernel cache). `direction` says how `threshold` is read:
"statistic" — drift when statistic > threshold; "p_value" — drift when p ≤ threshold.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from drift.result import TestResult

Kind = Literal["numeric", "categorical", "embedding"]
Direction = Literal["statistic", "p_value"]
TestFunc = Callable[..., TestResult]

_BUILTIN_MODULES = ("drift.psi", "drift.ks", "drift.wasserstein", "drift.categorical", "drift.mmd",
                    "drift.cluster_proportions", "drift.conditional")


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

    def run(
        self,
        reference: np.ndarray,
        current: np.ndarray,
        *,
        threshold: float | None = None,
        rng: np.random.Generator | int | None = None,
        **frozen,
    ) -> TestResult:
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        thr = self.default_threshold if threshold is None else float(threshold)
        return self.func(reference, current, threshold=thr, rng=rng, **frozen)


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
            for name in _BUILTIN_MODULES:
                importlib.import_module(name)
            _loaded = True


def get_test(name: str) -> TestSpec:
    _ensure_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise KeyError(f"unknown drift test {name!r}; registered: {known}") from None


def tests_for(kind: Kind) -> list[TestSpec]:
    _ensure_builtins()
    return [spec for spec in _REGISTRY.values() if spec.kind == kind]


def all_tests() -> list[TestSpec]:
    _ensure_builtins()
    return list(_REGISTRY.values())
