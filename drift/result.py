"""The one result shape every drift detector returns.

Storage writes one `drift_results` row per result, alerts evaluate rules over them and the
report renders them: all of them treat a PSI, a KS test, an MMD test or a cluster check alike.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

ALL = "*"  # the segment label of the whole window


@dataclass(frozen=True)
class TestResult:
    """One test on one feature in one segment.

    `threshold` is the one actually applied (after calibration and small-sample noise guards);
    `drifted` is False whenever `insufficient` is True: too little data is never an alert.
    """

    __test__ = False  # not a pytest class

    test: str
    statistic: float | None
    p_value: float | None
    threshold: float | None
    drifted: bool
    insufficient: bool = False
    detail: dict[str, Any] = field(default_factory=dict)
    feature: str = ""
    segment: str = ALL

    def with_context(self, *, feature: str | None = None, segment: str | None = None) -> TestResult:
        return replace(
            self,
            feature=self.feature if feature is None else feature,
            segment=self.segment if segment is None else segment,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: NaN/inf become None (JSON cannot spell them), numpy scalars become floats."""
        out = asdict(self)
        for key in ("statistic", "p_value", "threshold"):
            out[key] = clean_float(out[key])
        out["drifted"] = bool(out["drifted"])
        out["insufficient"] = bool(out["insufficient"])
        out["detail"] = jsonable(out["detail"])
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TestResult:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def insufficient(
    test: str, threshold: float | None, n_ref: int, n_cur: int, need: int
) -> TestResult:
    """The result for a test that had too few samples on either side to say anything."""
    return TestResult(
        test=test,
        statistic=None,
        p_value=None,
        threshold=threshold,
        drifted=False,
        insufficient=True,
        detail={"n_reference": int(n_ref), "n_current": int(n_cur), "min_samples": int(need)},
    )


def clean_float(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def jsonable(value: Any) -> Any:
    """Turn numpy scalars/arrays, tuples and NaN into plain JSON values."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    if hasattr(value, "tolist"):
        return jsonable(value.tolist())
    if isinstance(value, float):
        return clean_float(value)
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)
