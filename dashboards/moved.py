"""What moved in a run, worst first — weighed so a handful of requests cannot lead: a result
from fewer than MIN_SAMPLES samples or under MIN_SHARE of the window ranks after every result
above that floor, whatever its ratio to its threshold (it still leads when it is all there is)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from dashboards.alert_lead import Row, as_row, ratio
from drift.ranking import FLOOR_N as MIN_SAMPLES
from drift.ranking import FLOOR_SHARE as MIN_SHARE  # one floor: the incident's ranking's


def share_of_window(row: Row, window_samples: int | None) -> float | None:
    if row.samples is None or not window_samples:
        return None
    return row.samples / window_samples


def above_floor(row: Row, window_samples: int | None) -> bool:
    """Enough samples behind the result; a result that does not say how many counts as enough."""
    if row.samples is None:
        return True
    share = share_of_window(row, window_samples)
    return row.samples >= MIN_SAMPLES and (share is None or share >= MIN_SHARE)


def rank_moved(results: Sequence[Any], window_samples: int | None) -> list[Row]:
    """The drifted, sufficient results, those above the floor first, each part by ×threshold."""
    rows = [as_row(r) for r in results]
    moved = [r for r in rows if r.drifted and not r.insufficient]
    # stable: equals keep the run's order
    return sorted(moved, key=lambda r: (not above_floor(r, window_samples), -_finite(ratio(r))))


def _finite(x: float) -> float:
    return x if math.isfinite(x) else 0.0
