"""An alert's first sentence in the on-call's words: what moved, by how much in the feature's
own unit where it has one ("answers are 38 % shorter: median 120 → 74 tokens"), for whom and
since when. No test name, p-value or threshold: those are the evidence (dashboards/alert_lead.py).

`effect_size` ranks results by how much moved, not by how sure the test is: a permutation test's
p-value stops at 1/(B+1), so two very different shifts can share one p-value."""

from __future__ import annotations

import math
from datetime import datetime

from dashboards.alert_lead import Row, ratio, who

# feature -> (what it is; what is measured; its unit; the words for down and up)
FEATURES: dict[str, tuple[str, str, str, tuple[str, str]]] = {
    "prompt_tokens": ("prompts", "prompt length", "tokens", ("shorter", "longer")),
    "prompt_chars": ("prompts", "prompt length", "characters", ("shorter", "longer")),
    "completion_tokens": ("answers", "answer length", "tokens", ("shorter", "longer")),
    "response_chars": ("answers", "answer length", "characters", ("shorter", "longer")),
    "latency_ms": ("requests", "latency", "ms", ("faster", "slower")),
    "ttft_ms": ("first tokens", "time to first token", "ms", ("sooner", "later")),
    "tpot_ms": ("tokens", "time per output token", "ms", ("faster", "slower")),
    "queue_ms": ("requests", "queue time", "ms", ("queued less", "queued longer")),
    "tools_count": ("requests", "tools per request", "", ("use fewer tools", "use more tools")),
}
EMBEDDING_WORDS = {"prompt_embedding": "what prompts are about",
                   "response_embedding": "what answers say"}  # fmt: skip


def _number(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def centres(r: Row) -> tuple[float, float, str] | None:
    """(baseline, window, "median"|"mean") from the result's detail, when both are known."""
    d = r.detail or {}
    for kind in ("median", "mean"):
        a, b = d.get(f"reference_{kind}"), d.get(f"window_{kind}")
        if not (isinstance(a, int | float) and isinstance(b, int | float)):
            continue
        if math.isfinite(a) and math.isfinite(b) and (a != b or kind == "mean"):
            return float(a), float(b), kind
    return None


def relative_change(r: Row) -> float | None:
    found = centres(r)
    if found is None or found[0] == 0:
        return None
    return found[1] / found[0] - 1.0


def effect_size(r: Row) -> float:
    """How much moved, comparable across results of one alert: the relative change of the centre
    for numeric features, the share of traffic for new values and new prompt groups, else the
    test's distance past its threshold on the statistic (not the p-value)."""
    change = relative_change(r)
    if change is not None:
        return abs(change)
    d = r.detail or {}
    if r.test == "new_cluster" and r.statistic is not None:
        return float(r.statistic)
    if r.test == "cluster_mix":
        a, b = d.get("baseline_outside_share"), d.get("window_outside_share")
        if isinstance(a, int | float) and isinstance(b, int | float):
            return abs(float(b) - float(a))
    floor = d.get("effect_floor")
    if isinstance(floor, int | float) and floor > 0 and r.statistic is not None:
        return float(r.statistic) / float(floor)
    return ratio(r)


def _how_much(name: str, change: float, base: float, now: float, kind: str) -> str:
    plain = name.replace("_", " ")
    subject, measure, unit, (down, up) = FEATURES.get(name, (plain, plain, "", ("lower", "higher")))
    span = f"{kind} {_number(base)} → {_number(now)}{' ' + unit if unit else ''}"
    if change >= 1.0:
        factor = now / base
        verb = "doubled" if factor < 2.5 else f"grew {factor:.1f}-fold"
        return f"{measure.capitalize()} {verb} ({span})"
    if change <= -0.5:
        return f"{measure.capitalize()} fell by {-change:.0%} ({span})".replace("%", " %", 1)
    word = up if change > 0 else down
    return f"{subject.capitalize()} are {abs(change):.0%} {word} ({span})".replace("%", " %", 1)


def effect_phrase(r: Row) -> str:
    """What moved and by how much, in words."""
    found = centres(r)
    if found is not None and found[0] != 0:
        base, now, kind = found
        return _how_much(r.feature, now / base - 1.0, base, now, kind)
    d = r.detail or {}
    if r.test == "new_category":
        new = [v for v in d.get("new") or [] if isinstance(v, dict)]
        named = ", ".join(
            f"{v.get('value')} ({100 * v['share']:.0f} % of traffic)"
            if isinstance(v.get("share"), int | float)
            else str(v.get("value"))
            for v in ([v for v in new if v.get("big")] or new)[:3]
        )
        what = r.feature.replace("_", " ")
        shown = [v for v in new if v.get("big")] or new
        head = f"A new {what} appeared" if len(shown) == 1 else f"New {what} values appeared"
        return head + (f": {named}" if named else "")
    if r.test == "new_cluster" and r.statistic is not None:
        return f"A new kind of prompt is {100 * r.statistic:.0f} % of traffic"
    if r.test == "cluster_mix":
        a, b = d.get("baseline_outside_share"), d.get("window_outside_share")
        if isinstance(a, int | float) and isinstance(b, int | float):
            return (
                f"Prompts moved to new topics: {100 * b:.0f} % fall outside the baseline's "
                f"topics (was {100 * a:.0f} %)"
            )
        return "The mix of prompt topics changed"
    if r.feature in EMBEDDING_WORDS:
        return f"{EMBEDDING_WORDS[r.feature].capitalize()} changed"
    if r.feature.startswith("eval_"):
        return f"The {r.feature[5:].replace('_', ' ')} score moved"
    measure = FEATURES.get(r.feature, ("", r.feature.replace("_", " ")))[1]
    return f"The distribution of {measure} changed"


def effect_sentence(r: Row | None, summary: str, since: datetime | None) -> str:
    """The alert's first sentence: what moved, how much, for whom, since when."""
    if r is None:
        return summary
    when = f" since {since:%Y-%m-%d %H:%M} UTC" if since is not None else ""
    return f"{effect_phrase(r)} for {who(r.segment)}{when}."
