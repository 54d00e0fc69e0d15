"""A row cap for drift windows: which rows of each segment to read, and how to weight them.

A window larger than `max_rows` is read as a stratified sample by `segment` (the stratum the
traffic sampler itself uses): every segment keeps at least a floor of rows (a minority is never
thinned away), the rest of the budget is shared in proportion to each segment's remaining rows.
Inside a segment the kept rows are a systematic sample in time order (every n/q-th row, done in
SQL with row_number()), so the window's hours stay evenly covered and the choice is
deterministic. Each kept row's `sample_weight` is scaled by its segment's total weight over the
kept rows' weight (the inverse of the segment's keep fraction), so weighted totals per segment
are those of the full window.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, func, or_, select
from sqlalchemy.orm import Session

from storage.models import Sample

DEFAULT_MIN_PER_STRATUM = 200


@dataclass(frozen=True)
class Stratum:
    rows: int  # rows of the segment in the window
    weight: float  # their summed sample_weight
    quota: int  # rows to keep


def stratum_quotas(counts: Mapping[Hashable, int], max_rows: int,
                   min_per_stratum: int = DEFAULT_MIN_PER_STRATUM) -> dict[Hashable, int]:
    """Rows to keep per stratum: all of them when the total fits `max_rows`; else a floor each
    (lowered so the floors fit), the rest in proportion to the rows above the floor (largest
    remainder). Never more than a stratum has; the sum is min(total, max_rows)."""
    if max_rows < 1:
        raise ValueError(f"max_rows must be positive, got {max_rows}")
    total = sum(counts.values())
    if total <= max_rows:
        return dict(counts)
    floor = min(min_per_stratum, max_rows // max(len(counts), 1))
    base = {s: min(n, floor) for s, n in counts.items()}
    left = max_rows - sum(base.values())
    above = {s: n - base[s] for s, n in counts.items()}
    above_total = sum(above.values())
    shares = {s: left * a / above_total if above_total else 0.0 for s, a in above.items()}
    quotas = {s: base[s] + min(above[s], math.floor(shares[s])) for s in counts}
    spare = max_rows - sum(quotas.values())
    by_remainder = sorted(counts, key=lambda s: (shares[s] - math.floor(shares[s]), counts[s]), reverse=True)
    while spare > 0:
        progressed = False
        for s in by_remainder:
            if spare and quotas[s] < counts[s]:
                quotas[s] += 1
                spare -= 1
                progressed = True
        if not progressed:
            break
    return quotas


def weight_scale(stratum: Stratum, kept_weight: float) -> float:
    """Factor for the kept rows' weights so they sum to the stratum's full weight."""
    if kept_weight <= 0:
        return 1.0
    return stratum.weight / kept_weight


def plan_strata(session: Session, terms: list[ColumnElement[bool]], max_rows: int,
                min_per_stratum: int = DEFAULT_MIN_PER_STRATUM) -> dict[str | None, Stratum]:
    """Per segment of the window: its rows, its total weight and its quota (one GROUP BY)."""
    query = (select(Sample.segment, func.count(), func.sum(Sample.sample_weight))
             .where(*terms).group_by(Sample.segment))
    found = {seg: (int(n), float(w or 0.0)) for seg, n, w in session.execute(query)}
    quotas = stratum_quotas({s: n for s, (n, _) in found.items()}, max_rows, min_per_stratum)
    return {s: Stratum(n, w, quotas[s]) for s, (n, w) in found.items()}


def capped_rows(session: Session, terms: list[ColumnElement[bool]], columns: Sequence[Any],
                strata: Mapping[str | None, Stratum]) -> list[Any]:
    """The planned rows (`columns`), oldest first: whole segments where the quota is every row,
    a systematic time-ordered sample where it is fewer."""
    whole = [s for s, st in strata.items() if st.quota >= st.rows]
    rows: list[Any] = []
    if whole:
        named = [s for s in whole if s is not None]
        in_whole = or_(Sample.segment.in_(named), Sample.segment.is_(None)) if None in whole \
            else Sample.segment.in_(named)
        rows += session.execute(select(*columns).where(*terms, in_whole)).all()
    for seg, st in strata.items():
        if st.quota >= st.rows or st.quota <= 0:
            continue
        seg_term = Sample.segment.is_(None) if seg is None else Sample.segment == seg
        rn = func.row_number().over(order_by=(Sample.timestamp, Sample.id)).label("rn")
        sub = select(*columns, rn).where(*terms, seg_term).subquery()
        # keep row rn when floor(rn*q/n) steps up: exactly q rows, evenly spread in time
        step = (sub.c.rn * st.quota) // st.rows > ((sub.c.rn - 1) * st.quota) // st.rows
        rows += session.execute(select(*[sub.c[c.key] for c in columns]).where(step)).all()
    rows.sort(key=lambda r: (r.timestamp, r.id))
    return rows
