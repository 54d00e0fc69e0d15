"""Rule evaluation over raw drift results (one row per test x feature x segment).

The drift job normally proposes alerts itself; this turns stored `drift_results` rows (or any
objects/dicts with test, feature, segment, statistic, p_value, threshold, drifted) into the
same proposals through the rules' `test`/`feature` patterns, so an operator's rules file can
alert on any test the registry runs. Results with insufficient data never alert.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from alerts.proposal import ALL_SEGMENTS, Proposal, _get, _jsonable
from alerts.ruleset import RuleSet

MAX_RESULTS_IN_EVIDENCE = 20


def evaluate_results(results: Iterable[Any], rules: RuleSet) -> list[Proposal]:
    """One proposal per (matching rule, segment), grouping every drifted result it covers."""
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    chosen = {}
    for result in results:
        if not _get(result, "drifted") or _get(result, "insufficient"):
            continue
        row = {
            "test": _get(result, "test"),
            "feature": _get(result, "feature"),
            "segment": _get(result, "segment") or ALL_SEGMENTS,
            "statistic": _get(result, "statistic"),
            "p_value": _get(result, "p_value"),
            "threshold": _get(result, "threshold"),
        }
        rule = next(
            (r for r in rules.rules if r.match.reads_results and r.match.matches(row)), None
        )
        # a rule must say what the alert is: without severity and kind it only edits proposals
        if rule is None or not rule.enabled or rule.severity is None or rule.kind is None:
            continue
        key = (rule.name, row["segment"])
        grouped.setdefault(key, []).append(_jsonable(row))
        chosen[key] = rule
    proposals = []
    for (name, segment), rows in grouped.items():
        rule = chosen[(name, segment)]
        rows.sort(key=lambda r: (r["test"] or "", r["feature"] or ""))
        shown = "; ".join(_describe(r) for r in rows[:3])
        more = f" (+{len(rows) - 3} more)" if len(rows) > 3 else ""
        proposals.append(
            Proposal(
                severity=rule.severity,
                rule=name,
                kind=rule.kind,
                segment=segment,
                summary=f"{name} on segment {segment}: {shown}{more}",
                evidence={
                    "test": rows[0]["test"],
                    "feature": rows[0]["feature"],
                    "results": rows[:MAX_RESULTS_IN_EVIDENCE],
                    "num_results": len(rows),
                },
            )
        )
    return proposals


def _describe(row: dict[str, Any]) -> str:
    stat, thr, p = row["statistic"], row["threshold"], row["p_value"]
    text = f"{row['test']}({row['feature']})"
    if stat is not None:
        text += f" = {stat:.4g}"
    if thr is not None:
        text += f" > {thr:.4g}"
    if p is not None:
        text += f", p = {p:.3g}"
    return text
