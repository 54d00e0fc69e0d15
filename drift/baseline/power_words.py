"""The detectable effects of drift.baseline.power in words, for the baselines page: what each test
notices, in the feature's own units, in a window of the calibrated size. Never fails on odd input (a
missing mean, an effect not detected, a feature it has no name for)."""

from __future__ import annotations

from drift.baseline.power_report import DetectableEffect, PowerReport
from drift.formatting import clean_text, fmt_num
from drift.registry import find_test

# feature -> (what it measures, its unit)
FEATURE_WORDS = {
    "completion_tokens": ("response length", "tokens"),
    "response_chars": ("response length", "characters"),
    "prompt_tokens": ("prompt length", "tokens"),
    "prompt_chars": ("prompt length", "characters"),
    "latency_ms": ("latency", "ms"),
    "ttft_ms": ("time to first token", "ms"),
    "tpot_ms": ("time per output token", "ms"),
    "queue_ms": ("queue wait", "ms"),
    "mean_logprob": ("mean token log-probability", ""),
    "mean_entropy": ("mean token entropy", ""),
    "tools_count": ("tools per request", ""),
    "eval_score": ("eval score", ""),
    "finish_reason": ("finish reason", ""),
    "tool": ("tool named", ""),
    "prompt_embedding": ("prompts", ""),
    "response_embedding": ("responses", ""),
}


def test_words(name: str) -> str:
    """The test's display name (drift.registry) as the subject of a sentence."""
    spec = find_test(name)
    words = spec.display_name if spec and spec.display_name else f"the {clean_text(name)} test"
    return words[:1].upper() + words[1:]


def feature_words(feature: str) -> tuple[str, str]:
    if feature in FEATURE_WORDS:
        return FEATURE_WORDS[feature]
    if feature.startswith("eval_"):
        return f"eval score {clean_text(feature[5:])}", ""
    return clean_text(feature).replace("_", " "), ""


def _share(value: float | None) -> str:
    return fmt_num(None if value is None else 100.0 * value, ".0f") + " %"


def _amount(effect: DetectableEffect, e: float) -> str:
    """A shift of e sd in the feature's units, and as a share of its mean when that is positive."""
    what, unit = feature_words(effect.feature)
    parts = [f"{fmt_num(e, '.2g')} sd"]
    if effect.scale is not None:
        amount = e * effect.scale
        parts.append(f"{fmt_num(amount, '.3g')} {unit}".strip())
        if effect.mean is not None and effect.mean > 0:
            parts.append(f"{fmt_num(100.0 * amount / effect.mean, '.2g')} % of the mean")
    return f"{what} of {parts[0]} ({', '.join(parts[1:])})" if len(parts) > 1 else parts[0]


def describe(effect: DetectableEffect, window_size: int) -> str:
    """One sentence: the smallest effect the test detects, or what it does not detect."""
    test = test_words(effect.test)
    what, _unit = feature_words(effect.feature)
    window = f"in a window of {window_size} samples"
    if effect.note:
        return f"{test} on {what}: not measured ({clean_text(effect.note)})."
    e = effect.effect
    if effect.kind == "shift":
        if e is None:
            return (
                f"{test} does not reliably detect a shift in {what} of up to "
                f"{fmt_num(effect.largest, '.2g')} sd {window} (flagged in "
                f"{_share(effect.power_at_largest)} of such windows)."
            )
        return f"{test} detects a shift in {_amount(effect, e)} or more {window}."
    if effect.kind == "share":
        source = clean_text(effect.source)
        target = clean_text(effect.target)
        move = (
            f"{what} '{source}' ({_share(effect.source_share)} of the baseline) giving way to "
            f"'{target}' ({_share(effect.target_share)})"
        )
        if e is None:
            return (
                f"{test} does not reliably detect {move}, even by "
                f"{fmt_num(100.0 * effect.largest, '.2g')} points, {window}."
            )
        return f"{test} detects {move} by {fmt_num(100.0 * e, '.2g')} points or more {window}."
    if e is None:
        return f"{test} does not reliably detect {what} moving to new content {window}."
    return (
        f"{test} detects {fmt_num(100.0 * e, '.2g')} % or more of the {what} moving to new "
        f"content (one typical distance between two of them) {window}."
    )


def power_lines(report: PowerReport) -> list[str]:
    """Every effect of the report in words, in the report's order, then the tests it left out."""
    lines = [describe(e, report.window_size) for e in report.effects]
    if report.not_simulated:
        names = ", ".join(clean_text(t) for t in report.not_simulated)
        lines.append(f"Not simulated (they need prompt strata): {names}.")
    return lines


def summary_lines(report: PowerReport) -> list[str]:
    """One sentence per feature: its most sensitive test's smallest detected effect (effects of
    one feature share their unit), or what none of them detects."""
    best: dict[str, DetectableEffect] = {}
    for e in report.effects:
        held = best.get(e.feature)
        if held is None or (
            e.effect is not None and (held.effect is None or e.effect < held.effect)
        ):
            best[e.feature] = e
    return [describe(e, report.window_size) for e in best.values()]
