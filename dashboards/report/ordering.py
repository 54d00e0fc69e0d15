"""The order the report lists things in: alerts by severity (the worst first), test results
with what moved first (by how far past its threshold), then everything else."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from vigil.alert_table import SEVERITY_RANK


def by_severity(alerts: Iterable[Any]) -> list[Any]:
    return sorted(alerts, key=lambda a: (-SEVERITY_RANK.get(a.severity, -1), a.id))


def past_threshold(r: dict[str, Any]) -> float:
    """How far a result went past its threshold: the statistic over it, or -log10 p over
    -log10 alpha for a p-value test (0 when unknown)."""
    p, stat, thr = r.get("p_value"), r.get("statistic"), r.get("threshold")
    try:
        if p is not None and thr and 0 < thr < 1:
            return -math.log10(max(float(p), 1e-300)) / -math.log10(float(thr))
        if stat is not None and thr:
            return float(stat) / float(thr)
    except (TypeError, ValueError):
        pass
    return 0.0


def moved_first(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drifted results first (all traffic before slices, then furthest past the threshold),
    then the rest in their order."""
    moved = [r for r in results if r.get("drifted")]
    rest = [r for r in results if not r.get("drifted")]
    moved.sort(key=lambda r: (r.get("segment") != "*", -past_threshold(r)))
    return moved + rest


def new_segments(sizes: dict[str, dict[str, int]]) -> list[str]:
    """Slices with rows in the window and none in the baseline (a new tenant or segment)."""
    return [
        label for label, n in sizes.items()
        if label != "*" and n.get("n_current", 0) > 0 and n.get("n_reference", 1) == 0
    ]  # fmt: skip
