"""What moved in a run, in the order drift.cause.ranking leads with: effect weighed by the traffic
behind it, and a floor — a result from under FLOOR_N samples or FLOOR_SHARE of the window ranks
after every result above it, whatever its ratio to its threshold (it leads only when it is all
there is). The incident's cause ranks with the same function, so the overview and the incident
name the same worst signal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dashboards.alert_lead import Row, as_row
from drift.cause import ranking


@dataclass(frozen=True)
class Moved:
    row: Row
    share: float  # of the window, held by the rows behind the result
    samples: int
    above_floor: bool


def rank_moved(
    results: Sequence[Any],
    window_samples: int | None,
    sizes: Mapping[str, Mapping[str, int]] | None = None,
) -> list[Moved]:
    """The drifted, sufficient results, leading first. `sizes`: the run's segment sizes
    (label -> {"n_current"}), when the run kept them; the window alone otherwise."""
    rows = [as_row(r) for r in results]
    known = dict(sizes or {})
    if window_samples:
        known.setdefault("*", {"n_current": window_samples})
    dicts = [
        {
            "test": r.test,
            "feature": r.feature,
            "segment": r.segment,
            "statistic": r.statistic,
            "p_value": r.p_value,
            "threshold": r.threshold,
            "drifted": r.drifted,
            "insufficient": r.insufficient,
            "detail": r.detail or {},
        }
        for r in rows
    ]
    return [
        Moved(rows[x.index], x.share, x.n, x.above_floor)
        for x in ranking.rank(dicts, known, window_samples or None)
    ]
