"""A row cap for drift windows: which rows of each segment to read, and how to weight them.

A window larger than `max_rows` is read as a stratified sample by `segment` (the stratum the
traffic sampler itself uses): every segment keeps at least a floor of rows (a minority is never
thinned away), the rest of the budget is shared in proportion to each segment's remaining rows.
Inside a segment the kept rows are the `quota` rows with the smallest `draw` (storage.draw: a
fixed pseudo-random key per sample), a uniform sample without replacement, so the choice is
deterministic, independent of which rows have vectors, and known while the window fills: the
embed job embeds exactly these rows (`window_selection` is the one definition both use), or,
under a smaller cap for the rows whose vectors the embedding tests read, the nested subset
`nested_selection` (the first rows by draw of each segment's kept rows). Each
kept row's `sample_weight` is scaled by its segment's total weight over the
kept rows' weight (the inverse of the segment's keep fraction), so weighted totals per segment
are those of the full window.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, and_, false, func, or_, select, union_all
from sqlalchemy.orm import Session

from storage.models import Sample

DEFAULT_MIN_PER_STRATUM = 200
K = TypeVar("K", bound=Hashable)  # a stratum's key: a segment label (None: no segment)


@dataclass(frozen=True)
class Stratum:
    rows: int  # rows of the segment in the window
    weight: float  # their summed sample_weight
    quota: int  # rows to keep


def stratum_quotas(
    counts: Mapping[K, int], max_rows: int, min_per_stratum: int = DEFAULT_MIN_PER_STRATUM
) -> dict[K, int]:
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
    # ties broken by name, so the quotas never depend on the order the counts arrived in
    by_remainder = sorted(
        counts, key=lambda s: (shares[s] - math.floor(shares[s]), counts[s], repr(s)), reverse=True
    )
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


def plan_strata(
    session: Session,
    terms: list[ColumnElement[bool]],
    max_rows: int,
    min_per_stratum: int = DEFAULT_MIN_PER_STRATUM,
) -> dict[str | None, Stratum]:
    """Per segment of the window: its rows, its total weight and its quota (one GROUP BY)."""
    query = (
        select(Sample.segment, func.count(), func.sum(Sample.sample_weight))
        .where(*terms)
        .group_by(Sample.segment)
    )
    found = {seg: (int(n), float(w or 0.0)) for seg, n, w in session.execute(query)}
    quotas = stratum_quotas({s: n for s, (n, _) in found.items()}, max_rows, min_per_stratum)
    return {s: Stratum(n, w, quotas[s]) for s, (n, w) in found.items()}


@dataclass(frozen=True)
class Selection:
    """The rows a capped window reads: its strata and WHERE terms that pick them, one per
    part (the whole segments together, then each thinned segment's smallest draws), each an
    index range of the rows it keeps; `term` is their union."""

    strata: dict[str | None, Stratum]
    parts: tuple[ColumnElement[bool], ...]

    @property
    def term(self) -> ColumnElement[bool]:
        return or_(*self.parts) if self.parts else false()

    @property
    def rows(self) -> int:
        return sum(min(st.quota, st.rows) for st in self.strata.values())


def _segment_is(seg: str | None) -> ColumnElement[bool]:
    return Sample.segment.is_(None) if seg is None else Sample.segment == seg


def select_rows(
    session: Session, terms: list[ColumnElement[bool]], strata: Mapping[str | None, Stratum]
) -> tuple[ColumnElement[bool], ...]:
    """WHERE terms whose union is the planned rows: whole segments where the quota is every
    row, else the segment's `quota` smallest (draw, id), found as the last kept pair (one
    ORDER BY ... OFFSET per thinned segment)."""
    whole = [s for s, st in strata.items() if st.quota >= st.rows]
    parts: list[ColumnElement[bool]] = []
    if whole:
        named = [s for s in whole if s is not None]
        parts.append(
            or_(Sample.segment.in_(named), Sample.segment.is_(None))
            if None in whole
            else Sample.segment.in_(named)
        )
    for seg, st in strata.items():
        if st.quota >= st.rows or st.quota <= 0:
            continue
        last = session.execute(
            select(Sample.draw, Sample.id)
            .where(*terms, _segment_is(seg))
            .order_by(Sample.draw, Sample.id)
            .offset(st.quota - 1)
            .limit(1)
        ).one()
        kept = or_(Sample.draw < last.draw, and_(Sample.draw == last.draw, Sample.id <= last.id))
        parts.append(and_(_segment_is(seg), kept))
    return tuple(parts)


def window_selection(
    session: Session,
    terms: list[ColumnElement[bool]],
    max_rows: int,
    min_per_stratum: int = DEFAULT_MIN_PER_STRATUM,
) -> Selection:
    """Which rows of the window (`terms`) a read capped at `max_rows` keeps: the drift
    window's loader reads them, the embed job embeds them first."""
    strata = plan_strata(session, terms, max_rows, min_per_stratum)
    return Selection(strata, select_rows(session, terms, strata))


def nested_selection(
    session: Session,
    terms: list[ColumnElement[bool]],
    window: Selection,
    max_rows: int,
    min_per_stratum: int = DEFAULT_MIN_PER_STRATUM,
) -> Selection:
    """The rows of `window` (a capped read) that a smaller cap `max_rows` keeps, stratified the
    same way over the window's kept rows (a floor each, the rest in proportion): per segment the
    first rows by draw, so always a subset of the window's rows (the window keeps a segment's
    smallest draws, this keeps fewer of the same). The embedding tests read these."""
    if max_rows >= window.rows:
        return window
    kept = {s: min(st.quota, st.rows) for s, st in window.strata.items()}
    quotas = stratum_quotas(kept, max_rows, min_per_stratum)
    strata = {s: Stratum(st.rows, st.weight, quotas[s]) for s, st in window.strata.items()}
    return Selection(strata, select_rows(session, terms, strata))


def capped_rows(
    session: Session, terms: list[ColumnElement[bool]], columns: Sequence[Any], selection: Selection
) -> list[Any]:
    """The selected rows (`columns`), oldest first: a UNION ALL of one branch per part, so each
    branch is an index range of kept rows (one OR over the parts is planned as a scan of the
    whole window on some planners)."""
    if not selection.parts:
        return []
    branches = [select(*columns).where(*terms, part) for part in selection.parts]
    query = branches[0] if len(branches) == 1 else union_all(*branches).subquery().select()
    if len(branches) > 1:
        inner = query.selected_columns
        query = query.order_by(inner.timestamp, inner.id)
    else:
        query = query.order_by(Sample.timestamp, Sample.id)
    return list(session.execute(query).all())


def selected_ids(
    session: Session, terms: list[ColumnElement[bool]], selection: Selection
) -> frozenset[str]:
    """The ids of the selected rows (one read per part, as `capped_rows`)."""
    ids: set[str] = set()
    for part in selection.parts:
        ids.update(session.scalars(select(Sample.id).where(*terms, part)))
    return frozenset(ids)
