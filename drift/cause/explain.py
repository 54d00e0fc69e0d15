"""A drift run's cause in one sentence: what changed, for whom, how much traffic, since when.

Built from what the run knows, in this order:
1. new categories — a tenant, segment, model or prompt version, finish reason or tool the
   baseline never had (`new_category` results): "New tenant newco (mobile) and prompt version
   v2 are 67 % of traffic since 18:56 UTC"; a segment whose rows all belong to one new tenant is
   named in brackets after it;
2. the topics their prompts form (`drift.cause.topics`, named by their words);
   without a new category, a new prompt wording (`new_prompt_template` results): "Prompts
   changed wording: “Give a brief overview of …” is 33 % of traffic; answers moved with them";
3. without a new category, the leading moved signal (`drift.cause.ranking`: effect weighed
   by traffic share and samples, a floor for small slices): "Prompts moved in tenant acme (40 % of
   traffic): prompt embeddings 3.2x the threshold";
4. attribution: the kinds of the run's proposals (prompt, model, operational, eval, persona),
   and `why`: which side the evidence points to, what supports it (drift.alerting.attribution) and
   whether it is clear — when prompts and answers both moved with no prompt-side test strong
   enough to explain it, the headline says the cause is unclear instead of guessing.
`order` ranks the proposals (rule|segment) for the incident's member list. Statistics stay in
the evidence, never in the headline. Pure: results, sizes, keys and texts in, a Cause out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from drift.cause import ranking
from drift.cause.cause_evidence import new_templates, why, wording_headline
from drift.cause.topics import Topic, name_topics
from drift.formatting import clean_text
from drift.streams.window_evidence import since_words

NEW_VALUE_FEATURES = (
    "tenant",
    "segment",
    "model_version",
    "prompt_version",
    "finish_reason",
    "tool",
    "system_prompt",
)
NAMES = {
    "tenant": "tenant",
    "segment": "segment",
    "model_version": "model version",
    "prompt_version": "prompt version",
    "finish_reason": "finish reason",
    "tool": "tool",
    "system_prompt": "system prompt",
}
KIND_WORDS = {
    "prompt": "Prompts moved",
    "model": "Answers moved",
    "eval": "Answer quality fell",
    "operational": "Latency moved",
    "persona": "Who asks moved",
    "engine": "The engine changed",
}
MAX_TOPICS_NAMED = 5


@dataclass
class Cause:
    headline: str
    new_values: list[dict[str, Any]] = field(default_factory=list)  # feature, value, share, count
    share: float | None = None  # of the window, held by the new values' rows
    since: str | None = None  # ISO time of their first row
    topics: list[dict[str, Any]] = field(default_factory=list)
    attribution: dict[str, int] = field(default_factory=dict)  # proposal kind -> count
    worst: dict[str, Any] | None = None
    new_templates: list[dict[str, Any]] = field(default_factory=list)  # template, share, count
    why: dict[str, Any] = field(default_factory=dict)  # kind, confidence, supports, evidence
    order: list[str] = field(default_factory=list)  # "rule|segment", leading first

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def new_values(results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The new values that drift (`big`), whole window only, in NEW_VALUE_FEATURES order."""
    found = []
    for r in results:
        if (
            r.get("test") == "new_category"
            and r.get("segment") == "*"
            and r.get("drifted")
            and r.get("feature") in NEW_VALUE_FEATURES
        ):
            for v in (r.get("detail") or {}).get("new") or []:
                if isinstance(v, Mapping) and v.get("big"):
                    found.append(
                        {
                            "feature": r["feature"],
                            "value": str(v.get("value")),
                            "share": float(v.get("share") or 0.0),
                            "count": int(v.get("count") or 0),
                        }
                    )
    return sorted(found, key=lambda v: (NEW_VALUE_FEATURES.index(v["feature"]), -v["share"]))


def _rows(keys: Mapping[str, Sequence[Any]], feature: str, value: str) -> np.ndarray:
    column = keys.get(feature)
    if column is None:
        return np.zeros(0, dtype=bool)
    return np.array([str(x) == value for x in column], dtype=bool)


def _phrases(found: list[dict[str, Any]], keys: Mapping[str, Sequence[Any]]) -> list[str]:
    """ "tenant newco (mobile)", "prompt version v2": a new segment whose rows all belong to one
    new tenant is that tenant's, not a part of its own."""
    tenants = {
        v["value"]: _rows(keys, "tenant", v["value"]) for v in found if v["feature"] == "tenant"
    }
    phrases: list[tuple[str, str]] = []
    inside: dict[str, list[str]] = {}
    for v in found:
        if v["feature"] == "segment":
            rows = _rows(keys, "segment", v["value"])
            owner = next(
                (
                    t
                    for t, m in tenants.items()
                    if m.size == rows.size and rows.any() and not (rows & ~m).any()
                ),
                None,
            )
            if owner is not None:
                inside.setdefault(owner, []).append(v["value"])
                continue
        phrases.append((v["feature"], v["value"]))
    out = []
    for feature, value in phrases:
        extra = (
            f" ({', '.join(clean_text(s) for s in inside.get(value, []))})"
            if feature == "tenant" and inside.get(value)
            else ""
        )
        out.append(f"{NAMES[feature]} {clean_text(value)}{extra}")
    return out


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _clock(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%H:%M UTC")


def _order(proposals: Sequence[Any], sizes: Mapping[str, Mapping[str, int]], n: int) -> list[str]:
    """Proposals by their best evidence's rank (drift.cause.ranking), as rule|segment keys."""
    evidence, owner = [], []
    for i, p in enumerate(proposals):
        for r in (_get(p, "evidence") or {}).get("results") or []:
            evidence.append(r)
            owner.append(i)
    seen, out = set(), []
    for ranked in ranking.rank(evidence, sizes, n):
        p = proposals[owner[ranked.index]]
        key = f"{_get(p, 'rule')}|{_get(p, 'segment')}"
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out + [
        k for k in (f"{_get(p, 'rule')}|{_get(p, 'segment')}" for p in proposals) if k not in seen
    ]


def explain(
    results: Sequence[Mapping[str, Any]],
    sizes: Mapping[str, Mapping[str, int]],
    proposals: Sequence[Any],
    keys: Mapping[str, Sequence[Any]],
    timestamps: Sequence[float],
    prompts: Sequence[str] = (),
    baseline_prompts: Sequence[str] = (),
    *,
    seed: int = 0,
) -> Cause:
    """The run's cause. `keys`: the window's per-row values of the segment keys and categorical
    features (tenant, segment, prompt_version, ...); `timestamps`: per row, epoch seconds;
    `prompts`: per row (for topics), with the baseline's for contrast."""
    n = int((sizes.get("*") or {}).get("n_current") or len(timestamps))
    cause = Cause(headline="", order=_order(proposals, sizes, n))
    for p in proposals:
        kind = str(_get(p, "kind"))
        cause.attribution[kind] = cause.attribution.get(kind, 0) + 1
    found = new_values(results)
    cause.new_values = found
    moved = np.zeros(len(timestamps), dtype=bool)
    for v in found:
        rows = _rows(keys, v["feature"], v["value"])
        if rows.size == moved.size:
            moved |= rows
    if found and moved.any():
        _new_values_headline(cause, found, keys, np.asarray(timestamps, dtype=float), moved,
                             (prompts, baseline_prompts), seed)  # fmt: skip
    cause.new_templates = new_templates(results)
    cause.why = why(proposals)
    if not cause.headline and cause.new_templates:
        cause.headline = wording_headline(cause.new_templates, cause.why)
    lead = ranking.worst(results, sizes, n)
    if lead is not None:
        r = results[lead.index]
        cause.worst = {
            "test": r.get("test"),
            "feature": r.get("feature"),
            "segment": r.get("segment"),
            "effect": lead.effect,
            "share": lead.share,
            "n": lead.n,
            "above_floor": lead.above_floor,
        }
        if not cause.headline:
            cause.headline = _moved_sentence(r, lead, proposals)
            if cause.why.get("confidence") == "unclear":
                cause.headline += "; cause unclear: prompts and answers both moved"
            elif cause.why.get("kind") == "prompt" and cause.why.get("supports"):
                cause.headline += f"; the prompts changed ({cause.why['supports'][0]} moved)"
    building = [r for r in results if r.get("test") == "response_evidence" and r.get("drifted")]
    if building and cause.headline:
        cause.headline += f"; {since_words(building[0].get('detail') or {})}"
    if not cause.headline:
        cause.headline = "Nothing moved beyond its threshold"
    return cause


def _moved_sentence(r: Mapping[str, Any], lead: ranking.Ranked, proposals: Sequence[Any]) -> str:
    segment = str(r.get("segment") or "*")
    kinds = [str(_get(p, "kind")) for p in proposals if _get(p, "segment") == segment] or [
        str(_get(p, "kind")) for p in proposals
    ]
    what = KIND_WORDS.get(kinds[0], "Traffic moved") if kinds else "Traffic moved"
    where = (
        "across all traffic"
        if segment == "*"
        else f"in {clean_text(segment).replace('=', ' ')} ({lead.share:.0%} of traffic)".replace(
            "%", " %", 1
        )
    )
    moved = (r.get("detail") or {}).get("moved") if r.get("test") == "instruction_ngrams" else None
    m = moved[0] if isinstance(moved, list) and moved and isinstance(moved[0], dict) else {}
    shares = (m.get("window_share"), m.get("baseline_share"))
    if all(isinstance(v, int | float) for v in shares):  # the words say more than a statistic
        return f"{what} {where}: “{clean_text(str(m.get('ngram', '')))}” in " + (
            f"{m['window_share']:.0%} of prompts, was {m['baseline_share']:.0%}"
        ).replace("%", " %")
    feature = clean_text(str(r.get("feature") or "")).replace("_", " ")
    return f"{what} {where}: {feature} {lead.effect:.1f}× its threshold"


def _topic(t: Topic) -> dict[str, Any]:
    return {"name": t.name, "size": t.size, "share": t.share, "examples": list(t.examples)}


def _new_values_headline(
    cause: Cause,
    found: list[dict[str, Any]],
    keys: Mapping[str, Sequence[Any]],
    ts: np.ndarray,
    moved: np.ndarray,
    texts: tuple[Sequence[str], Sequence[str]],
    seed: int,
) -> None:
    """New values' share, since when, and the topics their prompts form."""
    prompts, baseline_prompts = texts
    cause.share = float(moved.mean())
    cause.since = datetime.fromtimestamp(float(ts[moved].min()), UTC).isoformat()
    parts = _phrases(found, keys)
    verb = "is" if len(parts) == 1 else "are"
    head = (
        f"New {_join(parts)} {verb} {cause.share:.0%} of traffic since "
        f"{_clock(float(ts[moved].min()))}"
    )
    head = head.replace("%", " %", 1)
    moved_prompts = (
        [p for p, m in zip(prompts, moved, strict=False) if m] if len(prompts) == len(moved) else []
    )
    topics = name_topics(moved_prompts, baseline_prompts, seed=seed) if moved_prompts else []
    cause.topics = [_topic(t) for t in topics]
    if topics:
        names = [t.name for t in topics[:MAX_TOPICS_NAMED]] + (
            ["…"] if len(topics) > MAX_TOPICS_NAMED else []
        )
        count = "a new topic" if len(topics) == 1 else f"{len(topics)} new topics"
        head += f"; their prompts form {count}: {', '.join(names)}"
    cause.headline = head
