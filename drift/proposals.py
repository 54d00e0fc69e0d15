"""Drifted results into proposed alerts through the rules table (drift.custom_rules): one alert
per (rule, segment), its summary one phrase per drifted result, its evidence the results."""

from __future__ import annotations

from collections.abc import Sequence

from drift.custom_rules import Rule
from drift.formatting import clean_text, fmt_num
from drift.outcome import ProposedAlert
from drift.result import ALL, TestResult


def describe_hit(r: TestResult) -> str:
    """One phrase for a drifted result in an alert summary. Every number goes through fmt_num:
    any field may be None, NaN or inf (cluster growth has no threshold) and must still print."""
    feature = clean_text(r.feature or ALL)
    if r.test == "new_category":
        big = [v for v in r.detail.get("new") or [] if isinstance(v, dict) and v.get("big")]
        return (
            ", ".join(
                f"new {feature} {clean_text(v.get('value'))}: "
                f"{fmt_num(v.get('share'), '.0%')} of the window"
                for v in big[:5]
            )
            or feature
        )
    if r.test == "eval_trend":
        return f"{feature} (-{fmt_num(r.statistic, '.1%')}, p={fmt_num(r.p_value)})"
    if r.test == "new_cluster":
        return f"{feature} (new group {fmt_num(r.statistic, '.0%')} of window)"
    if r.test == "cluster_growth":
        return f"{feature} (a small cluster grew {fmt_num(r.statistic)}x, p={fmt_num(r.p_value)})"
    if r.test in ("mmd", "ks", "chi2"):
        return f"{feature} (p={fmt_num(r.p_value)}, stat={fmt_num(r.statistic)})"
    return f"{feature} ({fmt_num(r.statistic)} > {fmt_num(r.threshold)})"


def propose_alerts(results: Sequence[TestResult], rules: Sequence[Rule]) -> list[ProposedAlert]:
    """One alert per (rule, segment) over the drifted, sufficient results the rule matches."""
    alerts = []
    for rule in rules:
        by_segment: dict[str, list[TestResult]] = {}
        for r in results:
            if r.drifted and not r.insufficient and rule.matches(r):
                by_segment.setdefault(r.segment, []).append(r)
        for segment, hits in by_segment.items():
            where = "whole window" if segment == ALL else clean_text(segment)
            summary = f"{rule.test} drift on {', '.join(describe_hit(h) for h in hits)} [{where}]"
            evidence = {"rule": rule.description, "results": [h.to_dict() for h in hits]}
            alerts.append(
                ProposedAlert(rule.severity, rule.name, rule.kind, segment, summary, evidence)
            )
    return alerts
