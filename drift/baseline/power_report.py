"""What drift.baseline.power measured on a baseline, as stored with it: per test and feature the
smallest effect detected with the target power, in the feature's own terms (a shift in standard
deviations, a share of rows moved between values, a share of rows moved in embedding space)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TARGET_POWER = 0.8
REPEATS = 16  # windows per effect size


@dataclass(frozen=True)
class DetectableEffect:
    """The smallest effect `test` detects on `feature` with the report's power; `effect` is None
    when even the largest effect tried (`largest`) is detected less often."""

    test: str
    feature: str
    kind: str  # shift | share | mix
    effect: float | None
    largest: float
    power_at_largest: float
    scale: float | None = None  # shift: the reference standard deviation (feature units)
    mean: float | None = None  # shift: the reference mean
    source: str | None = None  # share: the value rows move from, and its baseline share
    target: str | None = None  # share: the value rows move to, and its baseline share
    source_share: float | None = None
    target_share: float | None = None
    note: str | None = None  # why it could not be measured (too few rows)


@dataclass
class PowerReport:
    window_size: int
    reference_size: int
    power: float = TARGET_POWER
    repeats: int = REPEATS
    seed: int = 0
    effects: list[DetectableEffect] = field(default_factory=list)
    not_simulated: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "window_size": self.window_size,
            "reference_size": self.reference_size,
            "power": self.power,
            "repeats": self.repeats,
            "seed": self.seed,
            "effects": [{k: v for k, v in e.__dict__.items()} for e in self.effects],
            "not_simulated": list(self.not_simulated),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PowerReport:
        return cls(
            window_size=int(data["window_size"]),
            reference_size=int(data["reference_size"]),
            power=float(data.get("power", TARGET_POWER)),
            repeats=int(data.get("repeats", REPEATS)),
            seed=int(data.get("seed", 0)),
            effects=[DetectableEffect(**e) for e in data.get("effects") or []],
            not_simulated=[str(t) for t in data.get("not_simulated") or []],
        )
