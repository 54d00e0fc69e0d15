"""What an alert page opens with: the alert's own result — the test, feature and segment its
rule fired on (`evidence["results"]`, written by the drift job) — never another signal of the
same run. The result table lists the alert's own rows first, then the rest of its segment,
then what moved elsewhere in the run."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dashboards.charts import direction_of, drift_score, score_threshold
from storage.repositories.series import ResultPoint

MAX_TABLE_ROWS = 100


@dataclass(frozen=True)
class Row:
    """A result as the page shows it (a stored row, or the alert's evidence when the run's rows
    are gone)."""

    test: str
    feature: str
    segment: str
    statistic: float | None
    p_value: float | None
    threshold: float | None
    drifted: bool
    insufficient: bool = False
    detail: dict[str, Any] | None = None
    own: bool = False

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.test, self.feature, self.segment)

    @property
    def samples(self) -> int | None:
        """The window rows the result stands on; for new values, the rows that hold them."""
        new = [
            v for v in (self.detail or {}).get("new") or [] if isinstance(v, dict) and v.get("big")
        ]
        if self.test == "new_category" and new:
            counts = [v.get("count") for v in new]
            whole = [c for c in counts if isinstance(c, int) and not isinstance(c, bool)]
            if len(whole) == len(counts):
                return sum(whole)
        n = (self.detail or {}).get("n_current")
        return (
            int(n)
            if isinstance(n, int | float) and not isinstance(n, bool) and math.isfinite(n)
            else None
        )


def as_row(r: Any, own: bool = False) -> Row:
    get = r.get if isinstance(r, dict) else (lambda k, d=None: getattr(r, k, d))
    return Row(
        str(get("test") or "?"),
        str(get("feature") or "*"),
        str(get("segment") or "*"),
        get("statistic"),
        get("p_value"),
        get("threshold"),
        bool(get("drifted")),
        bool(get("insufficient")),
        get("detail") if isinstance(get("detail"), dict) else None,
        own,
    )


def ratio(r: Row) -> float:
    """How far past its threshold, on the chart's scale (-log10 p for p-value tests);
    0 if unknown."""
    direction = direction_of(r.test)
    point = ResultPoint(
        0,
        r.test,
        r.feature,
        r.segment,
        r.statistic,
        r.p_value,
        r.threshold,
        r.drifted,
        r.insufficient,
    )
    score, limit = drift_score(point, direction), score_threshold(r.threshold, direction)
    if score is None or not limit or not math.isfinite(score):
        return 0.0
    return score / limit


def own_keys(evidence: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    """The (test, feature, segment) of each result the alert's rule fired on, in evidence order."""
    out = []
    for r in (evidence or {}).get("results") or []:
        if isinstance(r, dict) and r.get("test"):
            out.append((str(r["test"]), str(r.get("feature") or "*"), str(r.get("segment") or "*")))
    return out


def own_rows(evidence: dict[str, Any] | None, results: Sequence[Any]) -> list[Row]:
    """The alert's own results: the stored rows its evidence names, else the evidence itself."""
    stored = {as_row(r).key: r for r in results}
    rows = []
    for key, r in zip(
        own_keys(evidence),
        [x for x in (evidence or {}).get("results") or [] if isinstance(x, dict) and x.get("test")],
        strict=True,
    ):
        rows.append(as_row(stored.get(key, r), own=True))
    return rows


def lead_row(own: Sequence[Row]) -> Row | None:
    """The alert's own result it leads with: the drifted one furthest past its threshold."""
    moved = [r for r in own if r.drifted] or list(own)
    return max(moved, key=ratio, default=None)  # max keeps the first of equals: evidence order


def who(segment: str) -> str:
    """A segment label in words: "*" is all traffic, "tenant=acme" is tenant acme."""
    if segment == "*":
        return "all traffic"
    key, sep, value = segment.partition("=")
    return f"{key} {value}" if sep else f"segment {segment}"


def _new_values(r: Row) -> str:
    new = [v for v in (r.detail or {}).get("new") or [] if isinstance(v, dict)]
    new = [
        v for v in new if v.get("big")
    ] or new  # the values that drift, when the detail marks them
    named = [
        f"{v.get('value')} ({v['share']:.0%} of the window)"
        if isinstance(v.get("share"), int | float)
        else str(v.get("value"))
        for v in new[:5]
    ]
    return ", ".join(named)


def at_floor(r: Row) -> int:
    """The permutation count when the result's p-value is the test's floor 1/(B+1), else 0: such
    a p-value says "at least this rare", not how far past the threshold the shift went."""
    b = (r.detail or {}).get("permutations")
    if isinstance(b, int) and b > 0 and r.p_value is not None and r.statistic is not None:
        return b if r.p_value <= 1.0 / (b + 1) * (1 + 1e-9) else 0
    return 0


def result_phrase(r: Row) -> str:
    """`<test> on <feature> for <who>` and how far it moved, in words a person can weigh."""
    head = f"{r.test} on {r.feature} for {who(r.segment)}"
    x = ratio(r)
    times = f" ({x:.1f}× its threshold)" if x else ""
    if r.test == "new_category" and _new_values(r):
        return f"{head}: new values {_new_values(r)}"
    if r.test == "new_cluster" and r.statistic is not None:
        return f"{head}: a new group of prompts is {r.statistic:.0%} of the window{times}"
    if direction_of(r.test) == "p_value" and r.p_value is not None and r.threshold is not None:
        floor = at_floor(r)
        if floor:
            return (
                f"{head}: p = {r.p_value:.2g}, the smallest its {floor} permutations can give"
                f" (threshold {r.threshold:.2g}); the statistic is {r.statistic:.3g}"
            )
        return f"{head}: p = {r.p_value:.2g}, at or below its threshold {r.threshold:.2g}" + (
            f" ({x:.1f}× on the -log10 p scale)" if x else ""
        )
    if r.statistic is not None and r.threshold is not None:
        return (
            f"{head} rose to {r.statistic:.3g} against a calibrated threshold of {r.threshold:.3g}"
            + (f" ({x:.1f}×)" if x else "")
        )
    return head


def lead_sentence(
    summary: str,
    own: Sequence[Row],
    window: str | None,
    window_samples: int | None,
    lead: Row | None = None,
) -> str:
    """One sentence: the alert's own worst result (or `lead`), the samples behind it and the
    other own results."""
    lead = lead if lead is not None else lead_row(own)
    if lead is None:
        return summary
    size = ""
    if lead.samples is not None:
        share = f", {lead.samples / window_samples:.0%} of the window" if window_samples else ""
        size = f" ({lead.samples} samples{share})"
    others = sum(1 for r in own if r.drifted and r is not lead)
    tail = f"; {others} more of this alert's signals moved too" if others else ""
    return f"{result_phrase(lead)}{' in ' + window if window else ''}{size}{tail}."


def table_rows(
    alert_segment: str, own: Sequence[Row], results: Sequence[Any], limit: int = MAX_TABLE_ROWS
) -> tuple[list[Row], int]:
    """(rows, left out): the alert's own results (worst first), the rest of its segment, then
    the run's drifted results elsewhere; results of other segments that did not move are counted,
    not listed (the report has them all)."""
    keys = {r.key for r in own}
    rest = [x for x in map(as_row, results) if x.key not in keys]
    same = [r for r in rest if r.segment == alert_segment]
    elsewhere = [r for r in rest if r.segment != alert_segment and r.drifted]
    rows = sorted(own, key=lambda r: (not r.drifted, -ratio(r)))
    rows += sorted(same, key=lambda r: (not r.drifted, -ratio(r), r.test, r.feature))
    rows += sorted(elsewhere, key=lambda r: (-ratio(r), r.segment, r.test, r.feature))
    total = len({as_row(r).key for r in results} | keys)
    shown = rows[:limit]
    return shown, total - len(shown)
