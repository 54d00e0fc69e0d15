"""Drifted results into proposed alerts through the rules table (drift.alerting.custom_rules): one
alert per (rule, segment), its summary one phrase per drifted result in people's words ("prompt
length moved 3.2× the alert threshold; 41 % of traffic"), its evidence the results with their
statistics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from drift.alerting.custom_rules import Rule
from drift.cause.ranking import effect
from drift.formatting import clean_text, fmt_num
from drift.outcome import ProposedAlert
from drift.registry import find_test
from drift.result import ALL, TestResult
from drift.streams.window_evidence import since_words

__all__ = ["describe_hit", "propose_alerts", "since_words"]

WORDS = {
    "prompt_chars": "prompt length",
    "prompt_tokens": "prompt length in tokens",
    "instruction_chars": "instruction length",
    "instruction_words": "instruction words",
    "prompt_template": "prompt templates",
    "system_prompt": "system prompts",
    "prompt_embedding": "what prompts ask",
    "response_embedding": "what answers say",
    "response_stats": "answer token statistics",
    "responses": "answers: what they say, how sure and how long",
    "response_embedding_by_template": "what answers say to the same prompt template",
    "response_stats_by_template": "answer token statistics for the same prompt template",
    "response_chars": "answer length",
    "completion_tokens": "answer length in tokens",
    "mean_logprob": "the model's token confidence",
    "mean_entropy": "the model's token entropy",
    "finish_reason": "how answers end",
    "tool": "tools named",
    "tools_count": "number of tools",
    "latency_ms": "latency",
    "ttft_ms": "time to first token",
    "tpot_ms": "time per output token",
    "queue_ms": "queue time",
}


def feature_words(feature: str) -> str:
    """A feature's name in people's words (eval scores by their evaluator's name)."""
    if feature.startswith("eval_"):
        return (
            f"eval score {clean_text(feature[5:])}".rstrip()
            if feature != "eval_score"
            else ("eval score")
        )
    return WORDS.get(feature, clean_text(feature).replace("_", " "))


def _traffic(share: float | None) -> str:
    return "" if share is None else f"; {fmt_num(share, '.0%')} of traffic".replace("%", " %")


def describe_hit(r: TestResult, share: float | None = None) -> str:
    """One phrase for a drifted result in an alert summary: what moved, by how much against its
    threshold, and (`share`) how much traffic its slice holds. Statistics stay in the evidence.
    Every number goes through fmt_num: any field may be None, NaN or inf and must still print."""
    feature = clean_text(r.feature or ALL)
    words = feature_words(feature)
    spec = find_test(r.test)
    if spec is not None and spec.phrase is not None:
        return spec.phrase(r, words, _traffic(share))
    times = effect(r.to_dict())
    return f"{words} moved {fmt_num(times, '.1f')}× the alert threshold{_traffic(share)}"


def _pct(share: object) -> str:
    return fmt_num(share, ".0%").replace("%", " %")


def _share(segment: str, sizes: Mapping[str, Mapping[str, int]] | None) -> float | None:
    if not sizes:
        return None
    n_all = (sizes.get(ALL) or {}).get("n_current") or 0
    n_seg = (sizes.get(segment) or {}).get("n_current")
    return None if not n_all or n_seg is None else min(1.0, n_seg / n_all)


def propose_alerts(
    results: Sequence[TestResult],
    rules: Sequence[Rule],
    sizes: Mapping[str, Mapping[str, int]] | None = None,
) -> list[ProposedAlert]:
    """One alert per (rule, segment) over the drifted, sufficient results the rule matches;
    `sizes` (segment -> n_current) adds each slice's share of traffic to the summary."""
    alerts = []
    for rule in rules:
        by_segment: dict[str, list[TestResult]] = {}
        for r in results:
            if r.drifted and not r.insufficient and rule.matches(r):
                by_segment.setdefault(r.segment, []).append(r)
        for segment, hits in by_segment.items():
            where = "all traffic" if segment == ALL else clean_text(segment).replace("=", " ")
            share = _share(segment, sizes)
            phrases = "; ".join(describe_hit(h, share) for h in hits)
            summary = f"{phrases} [{where}]"
            evidence = {"rule": rule.description, "results": [h.to_dict() for h in hits]}
            alerts.append(
                ProposedAlert(rule.severity, rule.name, rule.kind, segment, summary, evidence)
            )
    return alerts
