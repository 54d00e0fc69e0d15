"""What a battery run hands each test: the baseline's frozen state, the calibrated levels and
the options (drift.spec.run_test runs a registered test on one feature with all of it). Imports
no test and no registry, so every test can import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from drift.baseline.cluster_model import ClusterModel
    from drift.features.templates import TemplateModel


@dataclass
class Frozen:
    """What the baseline froze: PSI edges, Wasserstein scales, category levels, clusters, and
    the prompt templates (None when its records carried no prompt text)."""

    psi_edges: dict[str, np.ndarray] = field(default_factory=dict)
    scales: dict[str, float] = field(default_factory=dict)
    levels: dict[str, list[str]] = field(default_factory=dict)
    clusters: dict[str, ClusterModel] = field(default_factory=dict)
    templates: TemplateModel | None = None


@dataclass
class Levels:
    """Thresholds and effect floors by test then feature; missing entries take the spec's
    default, which the caller hands in (these levels know no test)."""

    thresholds: dict[str, dict[str, float]] = field(default_factory=dict)
    effect_floors: dict[str, dict[str, float]] = field(default_factory=dict)
    min_samples: dict[str, int] = field(default_factory=dict)

    def threshold(self, test: str, feature: str, default: float) -> float:
        by_test = self.thresholds.get(test, {})
        return by_test.get(feature, by_test.get("*", default))

    def floor(self, test: str, feature: str) -> float | None:
        by_test = self.effect_floors.get(test, {})
        return by_test.get(feature, by_test.get("*"))

    def need(self, test: str, default: int) -> int:
        return self.min_samples.get(test, default)


@dataclass
class BatteryOptions:
    mmd_permutations: int = 999
    mmd_max_samples: int = 2000
    eval_alpha: float = 0.01
    eval_drop: float = 0.05
    eval_window_days: float = 7.0
    eval_min_samples: int = 20
    cluster_min_samples: int = 50
    cluster_kwargs: dict[str, Any] = field(default_factory=dict)
    tests: tuple[str, ...] | None = None  # restrict to these test names (None: all)
    # responses compared within prompt templates (drift.detectors.prompt_response): off until the
    # baseline's template labels are cross-fitted (see there)
    by_template: bool = False

    def wants(self, name: str) -> bool:
        return self.tests is None or name in self.tests


@dataclass(frozen=True)
class TestInputs:
    """One battery run's shared inputs (the same for every feature and test)."""

    __test__ = False  # not a pytest class

    frozen: Frozen
    levels: Levels
    options: BatteryOptions
    rng: np.random.Generator
    # drift.stattests.mmd.MMDReference per feature (typed loosely: the tests import this module)
    mmd_refs: dict[str, Any] = field(default_factory=dict)
    prompts: Sequence[object] | None = None  # the window's prompt texts (whole window only)
