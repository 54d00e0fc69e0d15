"""The registry of drift tests: finds them (each a module in drift.stattests that registers a
drift.spec.TestSpec) and looks them up. Callers never name a test to run it: the battery, run_drift,
calibration, validation and the pages iterate `all_tests()` / `tests_for(kind)`.

The tests import drift.spec, never this module, so finding them imports no circle.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading

from drift.spec import (
    _REGISTRY,
    Collector,
    Direction,
    Kind,
    Scope,
    TestSpec,
    decide,
    no_args,
    not_run,
    register,
    run_test,
    unregister,
)

__all__ = [
    "Collector",
    "Direction",
    "Kind",
    "Scope",
    "TestSpec",
    "all_tests",
    "decide",
    "find_test",
    "get_test",
    "no_args",
    "not_run",
    "register",
    "run_test",
    "tests_for",
    "unregister",
]

BUILTIN_PACKAGE = "drift.stattests"

_loaded = False
_loading = threading.RLock()


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
