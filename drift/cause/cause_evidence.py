"""Two parts of a drift run's cause (drift.cause.explain): the window's new prompt wordings, and
what the attribution of its prompt/model proposals stands on (drift.alerting.attribution). Pure:
result and proposal dicts in, plain dicts out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from drift.formatting import clean_text


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def new_templates(results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The window's new prompt wordings that drift, whole window only, largest first."""
    found = []
    for r in results:
        if r.get("test") == "new_prompt_template" and r.get("segment") == "*" and r.get("drifted"):
            for v in (r.get("detail") or {}).get("new") or []:
                if isinstance(v, Mapping) and v.get("big"):
                    found.append(
                        {
                            "template": clean_text(v.get("template")),
                            "share": float(v.get("share") or 0.0),
                            "count": int(v.get("count") or 0),
                        }
                    )
    return sorted(found, key=lambda v: -v["share"])


def why(proposals: Sequence[Any]) -> dict[str, Any]:
    """What the attribution of the run's prompt/model proposals stands on
    (drift.alerting.attribution): `unclear` when any of them is, else the prompts when a response
    alert was moved to them, else the model when responses moved with prompts steady; {} without
    such proposals."""
    notes = [
        n
        for n in ((_get(p, "evidence") or {}).get("attribution") for p in proposals)
        if isinstance(n, Mapping)
    ]
    unclear = [n for n in notes if n.get("confidence") == "unclear"]
    moved = [n for n in notes if n.get("kind") == "prompt" and n.get("rule_kind") == "model"]
    models = [n for n in notes if n.get("kind") == "model"]
    pick = unclear or moved or models
    if not pick:
        return {}
    evidence = sorted({e for n in pick for e in n.get("evidence") or []})
    supports = sorted({str(n.get("supports")) for n in pick if n.get("supports")})
    if unclear:
        return {"kind": "unclear", "confidence": "unclear", "supports": [], "evidence": evidence}
    if moved:
        return {"kind": "prompt", "confidence": "clear", "supports": supports, "evidence": evidence}
    return {
        "kind": "model",
        "confidence": "clear",
        "supports": ["answers moved while prompts held steady"],
        "evidence": [],
    }


def wording_headline(found: list[dict[str, Any]], why: Mapping[str, Any]) -> str:
    """The run's headline when new prompt wordings are what moved (`found` from new_templates)."""
    top, more = found[0], len(found) - 1
    head = (
        f"Prompts changed wording: “{top['template']}” is {top['share']:.0%} of traffic"
    ).replace("%", " %")
    if more:
        head += f" (and {more} other new wording{'s' if more > 1 else ''})"
    if why.get("kind") == "prompt":
        head += "; answers moved with them"
    return head
